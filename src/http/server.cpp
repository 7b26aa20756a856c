// server.cpp: mixprec/http/http.h's Server. One I/O thread owns every socket (epoll, non-blocking)
// and every connection's state; worker threads only run handlers and hand the response back
// through a queue and an eventfd. So no lock guards a connection, a slow or idle client costs
// a buffer and never a thread, and every deadline is checked in one place (check_deadlines).
// Longer than 400 lines because a connection's life (accept, read, route, hand over,
// write, linger, close) is one state machine that reads best in one place.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "http/message.h"
#include "http/request_parser.h"
#include "mixprec/http/http.h"

namespace mixprec::http {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 64 << 10;
// Bytes read from one connection per wake-up: a fast sender cannot starve the others.
constexpr size_t kReadPerEvent = 256 << 10;
// After a response that closes the connection, what the client still sends is read and
// dropped for this long (or this much) before closing: closing with unread bytes would send
// a reset that can destroy the response in flight (RFC 9112 9.6).
constexpr auto kLingerTime = std::chrono::milliseconds(2000);
constexpr int64_t kLingerBytes = 1 << 20;

// What a connection beyond max_connections gets before it is closed, its request unread.
const std::string& shed_response() {
  static const std::string bytes = [] {
    Response r = error_response(503, "too many connections; retry in a moment");
    r.set_header("Retry-After", "1");
    return serialize_response(r, false, false);
  }();
  return bytes;
}

// Runs a finisher at most once, from whichever thread gets there first.
std::function<void()> once(std::function<void()> f) {
  if (!f) return [] {};
  auto done = std::make_shared<std::atomic<bool>>(false);
  return [done, f = std::move(f)] {
    if (!done->exchange(true)) f();
  };
}

bool set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

std::string peer_name(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

}  // namespace

class Server::Impl {
 public:
  Impl(ServerOptions options, std::vector<Route> routes) : opt_(std::move(options)), routes_(std::move(routes)) {}
  ~Impl() {
    stop();
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
    if (wake_fd_ >= 0) ::close(wake_fd_);
  }

  Status bind();
  Status run();
  void stop() {
    stop_requested_.store(true);
    wake();
  }
  int port() const { return port_; }
  Stats stats() const { return {open_.load(), requests_.load(), shed_.load()}; }

 private:
  enum class Phase { idle, reading, handling, writing, lingering };
  struct Connection {
    uint64_t id = 0;
    int fd = -1;
    std::string remote;
    std::string in;  // bytes read and not yet consumed by the parser
    RequestParser parser;
    Phase phase = Phase::idle;
    Clock::time_point deadline, request_start, idle_since;
    std::string out;
    size_t out_off = 0;
    bool close_after_write = false, head_only = false, continue_sent = false, reading_paused = false;
    const Route* route = nullptr;
    bool routed = false;
    std::function<void()> finish_arrival;
    int64_t body_reserved = 0;
    int64_t lingered = 0;
    explicit Connection(const Limits& limits) : parser(limits) {}
  };
  struct Job {
    uint64_t id;
    Request request;
    const Route* route;
  };
  struct Done {
    uint64_t id;
    Response response;
  };

  void wake() {
    if (wake_fd_ >= 0) {
      const uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
    }
  }
  void accept_connections();
  void on_readable(Connection& c);
  void on_writable(Connection& c);
  void process_input(Connection& c);
  void route_head(Connection& c);
  void dispatch(Connection& c);
  void respond(Connection& c, Response response, bool close);
  void finish_response(Connection& c);
  void close_connection(uint64_t id);
  void watch(Connection& c);
  void check_deadlines();
  void take_done();
  void worker_loop();
  bool shed_one_idle();
  void release_body(Connection& c) {
    buffered_body_ -= c.body_reserved;
    c.body_reserved = 0;
  }

  const ServerOptions opt_;
  const std::vector<Route> routes_;
  int listen_fd_ = -1, epoll_fd_ = -1, wake_fd_ = -1, port_ = 0;
  std::atomic<bool> stop_requested_{false};
  bool stopping_ = false;
  Clock::time_point accept_paused_until_{};
  bool listen_watched_ = false;

  std::unordered_map<uint64_t, std::unique_ptr<Connection>> conns_;
  uint64_t next_id_ = 2;  // 0: the listening socket, 1: the eventfd
  int64_t buffered_body_ = 0;
  int64_t handling_ = 0;
  std::atomic<int64_t> open_{0}, requests_{0}, shed_{0};

  std::mutex mu_;  // guards jobs_, done_, workers_stop_
  std::condition_variable work_cv_;
  std::deque<Job> jobs_;
  std::deque<Done> done_;
  bool workers_stop_ = false;
  std::vector<std::thread> workers_;
};

Status Server::Impl::bind() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(opt_.port);
  if (int rc = getaddrinfo(opt_.host.c_str(), service.c_str(), &hints, &found); rc != 0)
    return Status::invalid_argument("--host " + opt_.host + ": not an address of this machine (" + gai_strerror(rc) + ")");
  Status last = Status::invalid_argument("--host " + opt_.host + ": no usable address");
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR only: with SO_REUSEPORT a second server on the same port would start
    // silently and take half the connections.
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0 && set_nonblocking(fd)) {
      listen_fd_ = fd;
      sockaddr_storage bound{};
      socklen_t len = sizeof bound;
      getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
      port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
      break;
    }
    const int err = errno;
    ::close(fd);
    last = err == EADDRINUSE ? Status(StatusCode::busy, opt_.host + ":" + service + " is in use by another program")
                             : Status::invalid_argument("cannot listen on " + opt_.host + ":" + service + ": " +
                                                        std::strerror(err));
  }
  freeaddrinfo(found);
  if (listen_fd_ < 0) return last;
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) return Status::io_error(std::string("epoll/eventfd: ") + std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  listen_watched_ = true;
  ev.data.u64 = 1;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  return Status::ok();
}

Status Server::Impl::run() {
  if (listen_fd_ < 0) return Status::internal("http::Server::run before a successful bind");
  for (int64_t i = 0; i < std::max<int64_t>(1, opt_.workers); ++i) workers_.emplace_back([this] { worker_loop(); });
  std::vector<epoll_event> events(256);
  while (true) {
    if (stop_requested_.load() && !stopping_) {
      // Stop: no new connections; connections not being answered are closed (a request still
      // arriving was not started, so closing loses nothing the client was promised).
      stopping_ = true;
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
      ::close(listen_fd_);
      listen_fd_ = -1;
      std::vector<uint64_t> quiet;
      for (auto& [id, c] : conns_)
        if (c->phase == Phase::idle || c->phase == Phase::reading) quiet.push_back(id);
      for (uint64_t id : quiet) close_connection(id);
    }
    if (stopping_ && conns_.empty() && handling_ == 0) break;
    if (!listen_watched_ && listen_fd_ >= 0 && Clock::now() >= accept_paused_until_) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = 0;
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
      listen_watched_ = true;
    }
    const int n = epoll_wait(epoll_fd_, events.data(), int(events.size()), 100);
    if (n < 0 && errno != EINTR) return Status::io_error(std::string("epoll_wait: ") + std::strerror(errno));
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == 0) {
        accept_connections();
      } else if (id == 1) {
        uint64_t count = 0;
        [[maybe_unused]] ssize_t r = ::read(wake_fd_, &count, sizeof count);
      } else if (auto it = conns_.find(id); it != conns_.end()) {
        Connection& c = *it->second;
        if (c.reading_paused && (events[i].events & (EPOLLHUP | EPOLLERR))) {
          close_connection(id);  // reset or gone while its request was handled: nobody to answer
          continue;
        }
        if (events[i].events & EPOLLOUT) on_writable(c);
        if (conns_.count(id) && (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))) on_readable(c);
      }
    }
    take_done();
    check_deadlines();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers_stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  return Status::ok();
}

bool Server::Impl::shed_one_idle() {
  // Idle: waiting for a request with nothing of it read, nor waiting in the socket (a request
  // that arrived with the connection is not idle, whether or not this loop has read it yet).
  auto unread = [](int fd) {
    int n = 0;
    return ioctl(fd, FIONREAD, &n) == 0 ? n : 1;
  };
  Connection* oldest = nullptr;
  for (auto& [id, c] : conns_)
    if (c->phase == Phase::idle && c->in.empty() && (oldest == nullptr || c->idle_since < oldest->idle_since) &&
        unread(c->fd) == 0)
      oldest = c.get();
  if (oldest == nullptr) return false;
  shed_.fetch_add(1);
  close_connection(oldest->id);
  return true;
}

void Server::Impl::accept_connections() {
  while (listen_fd_ >= 0) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: make room by closing an idle connection, or stop accepting for a
        // moment (the listening socket would otherwise wake this loop again at once).
        if (!shed_one_idle()) {
          epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
          listen_watched_ = false;
          accept_paused_until_ = Clock::now() + std::chrono::milliseconds(100);
          return;
        }
        continue;
      }
      return;  // EAGAIN, or a connection that went away before it was accepted
    }
    if (int64_t(conns_.size()) >= opt_.max_connections && !shed_one_idle()) {
      // Every connection is busy: the newcomer is told so and closed (its request unread).
      shed_.fetch_add(1);
      [[maybe_unused]] ssize_t w = ::send(fd, shed_response().data(), shed_response().size(), MSG_NOSIGNAL);
      ::shutdown(fd, SHUT_WR);
      // What the client already sent is read and dropped: closing with unread bytes would
      // send a reset that can overtake the 503 (no waiting: the socket is non-blocking).
      char drop[4096];
      for (int i = 0; i < 16 && ::recv(fd, drop, sizeof drop, 0) > 0; ++i) {
      }
      ::close(fd);
      continue;
    }
    int yes = 1;
    // Answers go out at once: with Nagle's algorithm a small response waits for the client's
    // delayed ACK (40 ms per request on Linux).
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    auto c = std::make_unique<Connection>(opt_.limits);
    c->id = next_id_++;
    c->fd = fd;
    c->remote = peer_name(addr);
    c->idle_since = Clock::now();
    c->deadline = c->idle_since + opt_.idle_timeout;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = c->id;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    open_.fetch_add(1);
    conns_.emplace(c->id, std::move(c));
  }
}

void Server::Impl::watch(Connection& c) {
  epoll_event ev{};
  ev.data.u64 = c.id;
  // While reading is paused (a request being handled or answered) a client's half-close is
  // not watched: level-triggered, it would wake the loop again and again until the answer.
  ev.events = 0;
  if (!c.reading_paused) ev.events |= EPOLLIN | EPOLLRDHUP;
  if (c.out_off < c.out.size()) ev.events |= EPOLLOUT;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
}

void Server::Impl::close_connection(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Connection& c = *it->second;
  if (c.finish_arrival) c.finish_arrival();  // a request abandoned before its handler ran
  release_body(c);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  ::close(c.fd);
  open_.fetch_sub(1);
  conns_.erase(it);
}

void Server::Impl::on_readable(Connection& c) {
  if (c.reading_paused) return;  // a hang-up while handling: noticed when the answer is written
  const uint64_t id = c.id;
  size_t total = 0;
  char buf[kReadChunk];
  while (total < kReadPerEvent) {
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n > 0) {
      total += size_t(n);
      if (c.phase == Phase::lingering) {
        c.lingered += n;
        if (c.lingered > kLingerBytes) return close_connection(id);
        continue;
      }
      c.in.append(buf, size_t(n));
      process_input(c);
      if (!conns_.count(id) || c.reading_paused) return;
      continue;
    }
    if (n == 0) {
      // The client closed its side. A request it had not finished is dropped; a response
      // being written still goes out (half-close), then the connection closes.
      if (c.phase == Phase::writing) {
        c.close_after_write = true;
        c.reading_paused = true;
        watch(c);
        return;
      }
      return close_connection(id);
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return close_connection(id);
    return;
  }
}

void Server::Impl::process_input(Connection& c) {
  if (c.phase == Phase::idle && !c.in.empty()) {
    c.phase = Phase::reading;
    c.request_start = Clock::now();
    c.deadline = c.request_start + opt_.request_timeout;
  }
  if (c.phase != Phase::reading) return;
  const size_t consumed = c.parser.feed(c.in);
  c.in.erase(0, consumed);
  if (c.parser.failed()) {
    return respond(c, error_response(c.parser.error_status(), c.parser.error_message()), true);
  }
  if (c.parser.head_done() && !c.routed) {
    const uint64_t id = c.id;
    route_head(c);
    if (!conns_.count(id) || c.phase != Phase::reading) return;
  }
  // The bodies held at once are bounded across connections, not only per request.
  const int64_t holding = std::max(c.parser.content_length(), c.parser.body_bytes());
  if (holding > c.body_reserved) {
    if (buffered_body_ + holding - c.body_reserved > opt_.max_buffered_body_bytes) {
      Response busy = error_response(503, "the server is holding too many request bodies; retry in a moment");
      busy.set_header("Retry-After", "1");
      return respond(c, std::move(busy), true);
    }
    buffered_body_ += holding - c.body_reserved;
    c.body_reserved = holding;
  }
  if (c.parser.complete()) dispatch(c);
}

void Server::Impl::route_head(Connection& c) {
  c.routed = true;
  Request& req = c.parser.request();
  c.head_only = req.method == "HEAD";
  std::string allow;
  for (const Route& r : routes_) {
    if (r.path != req.path) continue;
    if (r.method == req.method) {
      c.route = &r;
      break;
    }
    allow += (allow.empty() ? "" : ", ") + r.method;
  }
  // An answer before the body is read closes the connection: the unread body would
  // otherwise be taken for the next request.
  const bool body_pending = !c.parser.complete();
  if (c.route == nullptr && allow.empty()) {
    std::string routes;
    for (const Route& r : routes_) routes += (routes.empty() ? "" : ", ") + r.method + " " + r.path;
    return respond(c, error_response(404, "no route " + req.method + " " + req.path + " (routes: " + routes + ")"),
                   body_pending);
  }
  if (c.route == nullptr) {
    Response r = error_response(405, "method " + req.method + " is not allowed on " + req.path + " (allowed: " + allow + ")");
    r.set_header("Allow", allow);
    return respond(c, std::move(r), body_pending);
  }
  if (c.route->on_arrival) c.finish_arrival = once(c.route->on_arrival());
  if (c.parser.expects_continue() && !c.continue_sent) {
    // The client waits for this before it sends its body (curl does for bodies over 1 KiB).
    c.continue_sent = true;
    c.out += "HTTP/1.1 100 Continue\r\n\r\n";
    watch(c);  // written by the loop (writing here could close c under process_input's feet)
  }
}

void Server::Impl::dispatch(Connection& c) {
  requests_.fetch_add(1);
  Request req = std::move(c.parser.request());
  req.remote = c.remote;
  req.finish_arrival = c.finish_arrival;
  if (!req.finish_arrival) req.finish_arrival = [] {};
  c.phase = Phase::handling;
  c.reading_paused = true;  // a pipelined next request waits in the socket until this one is answered
  watch(c);
  // The parser keeps method and path for the access log; the body has moved to the handler.
  c.parser.request().method = req.method;
  c.parser.request().path = req.path;
  if (c.route->inline_on_io_thread) {
    Response res;
    try {
      c.route->handler(req, res);
    } catch (const std::exception& e) {
      res = error_response(500, std::string("internal error: ") + e.what());
    }
    req.finish_arrival();
    return respond(c, std::move(res), !c.parser.keep_alive());
  }
  ++handling_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back({c.id, std::move(req), c.route});
  }
  work_cv_.notify_one();
}

void Server::Impl::worker_loop() {
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return workers_stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    Response res;
    try {
      job.route->handler(job.request, res);
    } catch (const std::exception& e) {
      res = error_response(500, std::string("internal error: ") + e.what());
    } catch (...) {
      res = error_response(500, "internal error");
    }
    job.request.finish_arrival();
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_.push_back({job.id, std::move(res)});
    }
    wake();
  }
}

void Server::Impl::take_done() {
  std::deque<Done> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done.swap(done_);
  }
  for (Done& d : done) {
    --handling_;
    auto it = conns_.find(d.id);
    if (it == conns_.end()) continue;
    Connection& c = *it->second;
    c.finish_arrival = nullptr;  // run by the worker already
    respond(c, std::move(d.response), !c.parser.keep_alive() || stopping_);
  }
}

void Server::Impl::respond(Connection& c, Response response, bool close) {
  if (c.phase == Phase::idle) c.request_start = Clock::now();
  const Request& req = c.parser.request();
  if (opt_.on_response) {
    const double seconds = std::chrono::duration<double>(Clock::now() - c.request_start).count();
    try {
      opt_.on_response(req, response.status, seconds);
    } catch (...) {
      // the access log must never take the connection down
    }
  }
  c.close_after_write = close || stopping_;
  c.out += serialize_response(response, !c.close_after_write, c.head_only);
  c.phase = Phase::writing;
  c.deadline = Clock::now() + opt_.write_timeout;
  c.reading_paused = true;
  release_body(c);
  on_writable(c);
}

void Server::Impl::on_writable(Connection& c) {
  const uint64_t id = c.id;
  while (c.out_off < c.out.size()) {
    const ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_off += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return watch(c);
    return close_connection(id);  // the client is gone
  }
  c.out.clear();
  c.out_off = 0;
  if (c.phase == Phase::writing) return finish_response(c);
  watch(c);  // a 100 Continue went out: back to reading
}

void Server::Impl::finish_response(Connection& c) {
  if (c.close_after_write) {
    // Lingering close: stop sending, drop what the client still sends, then close.
    ::shutdown(c.fd, SHUT_WR);
    c.phase = Phase::lingering;
    c.deadline = Clock::now() + kLingerTime;
    c.reading_paused = false;
    watch(c);
    return;
  }
  c.parser.reset();
  c.phase = Phase::idle;
  c.route = nullptr;
  c.routed = c.head_only = c.continue_sent = false;
  c.finish_arrival = nullptr;
  c.idle_since = Clock::now();
  c.deadline = c.idle_since + opt_.idle_timeout;
  c.reading_paused = false;
  watch(c);
  if (!c.in.empty()) process_input(c);  // a pipelined request already read
}

void Server::Impl::check_deadlines() {
  const auto now = Clock::now();
  std::vector<uint64_t> expired;
  for (auto& [id, c] : conns_)
    if (c->phase != Phase::handling && now >= c->deadline) expired.push_back(id);
  for (uint64_t id : expired) {
    Connection& c = *conns_.at(id);
    if (c.phase == Phase::reading) {
      respond(c, error_response(408, "the request was not complete within " +
                                         std::to_string(opt_.request_timeout.count() / 1000.0).substr(0, 5) +
                                         " s of its first byte (--timeout)"),
              true);
    } else {
      close_connection(id);  // idle past its time, a client not reading its answer, or lingering done
    }
  }
}

Server::Server(ServerOptions options, std::vector<Route> routes)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(routes))) {}
Server::~Server() = default;
Status Server::bind() { return impl_->bind(); }
int Server::port() const { return impl_->port(); }
Status Server::run() { return impl_->run(); }
void Server::stop() { impl_->stop(); }
Server::Stats Server::stats() const { return impl_->stats(); }

}  // namespace mixprec::http
