// http_server_test.cpp: mixprec's HTTP server over real loopback sockets, one test per bound
// of issue 31 (a request that crashed the server, chunked bodies past the limit, slow
// clients, connection floods, smuggling, 405) plus keep-alive, pipelining, 100-continue and
// shutdown. No test depends on timing: a deadline test waits (up to a minute) for the answer
// the deadline must produce, so a loaded machine makes it slower, never wrong.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "mixprec/http/http.h"

namespace mixprec::http {
namespace {

// A raw TCP client: what it sends is exactly what the test wrote.
class Client {
 public:
  explicit Client(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{60, 0};  // a server that never answers fails the test instead of hanging it
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~Client() { ::close(fd_); }
  bool connected() const { return connected_; }
  bool send(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += size_t(n);
    }
    return true;
  }
  // One response: status line, headers, and Content-Length bytes of body. "" on EOF/timeout.
  std::string response() {
    while (true) {
      const size_t end = buf_.find("\r\n\r\n");
      if (end != std::string::npos) {
        const std::string head = buf_.substr(0, end + 4);
        size_t length = 0;
        const size_t cl = head.find("Content-Length: ");
        if (cl != std::string::npos) length = std::stoul(head.substr(cl + 16));
        if (buf_.size() >= end + 4 + length) {
          std::string r = buf_.substr(0, end + 4 + length);
          buf_.erase(0, end + 4 + length);
          return r;
        }
      }
      if (!read_more()) return "";
    }
  }
  // True when the server closed the connection (EOF or reset) with nothing more to read.
  bool closed_by_server() {
    while (buf_.empty()) {
      if (!read_more()) return eof_;
    }
    return false;
  }
  int fd() const { return fd_; }

 private:
  bool read_more() {
    char b[4096];
    const ssize_t n = ::recv(fd_, b, sizeof b, 0);
    if (n <= 0) {
      eof_ = n == 0 || errno == ECONNRESET;
      return false;
    }
    buf_.append(b, size_t(n));
    return true;
  }
  int fd_ = -1;
  bool connected_ = false, eof_ = false;
  std::string buf_;
};

int status_of(const std::string& response) {
  return response.size() > 12 ? std::stoi(response.substr(9, 3)) : 0;
}
std::string body_of(const std::string& response) {
  const size_t end = response.find("\r\n\r\n");
  return end == std::string::npos ? "" : response.substr(end + 4);
}

// A gate a handler can wait at, so a test holds a worker busy for as long as it needs.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int waiting = 0;
  void wait() {
    std::unique_lock<std::mutex> lock(mu);
    ++waiting;
    cv.notify_all();
    cv.wait(lock, [this] { return open; });
  }
  void wait_for_waiters(int n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return waiting >= n; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
};

class RunningServer {
 public:
  RunningServer(ServerOptions options, std::vector<Route> routes) : server_(withport0(std::move(options)), std::move(routes)) {
    const Status s = server_.bind();
    EXPECT_TRUE(s.is_ok()) << s.message();
    thread_ = std::thread([this] { result_ = server_.run(); });
  }
  ~RunningServer() { stop(); }
  void stop() {
    if (thread_.joinable()) {
      server_.stop();
      thread_.join();
    }
  }
  int port() const { return server_.port(); }
  Server& server() { return server_; }

 private:
  static ServerOptions withport0(ServerOptions o) {
    o.host = "127.0.0.1";
    o.port = 0;
    return o;
  }
  Server server_;
  std::thread thread_;
  Status result_;
};

// How many requests to /arrive had their head read, and how many of those were finished.
struct Arrivals {
  std::atomic<int> started{0}, finished{0};
  void wait_started(int n) const {
    while (started.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
};

std::vector<Route> echo_routes(Gate* gate = nullptr, Arrivals* arrivals = nullptr) {
  std::vector<Route> routes;
  routes.push_back({"GET", "/healthz", [](Request&, Response& res) { res.body = "{\"status\": \"ok\"}\n"; }, true, {}});
  routes.push_back({"POST", "/echo", [](Request& req, Response& res) {
                      res.content_type = "application/octet-stream";
                      res.body = req.body;
                    }, false, {}});
  routes.push_back({"POST", "/wait", [gate](Request&, Response& res) {
                      if (gate) gate->wait();
                      res.body = "done";
                    }, false, {}});
  routes.push_back({"POST", "/throw", [](Request&, Response&) { throw std::runtime_error("boom \xff"); }, false, {}});
  routes.push_back({"POST", "/arrive", [](Request& req, Response& res) {
                      req.finish_arrival();
                      req.finish_arrival();  // a second call must not count twice
                      res.body = "ok";
                    }, false,
                    [arrivals]() -> std::function<void()> {
                      if (arrivals) arrivals->started.fetch_add(1);
                      return [arrivals] {
                        if (arrivals) arrivals->finished.fetch_add(1);
                      };
                    }});
  return routes;
}

ServerOptions options() {
  ServerOptions o;
  o.workers = 2;
  o.limits.max_body_bytes = 1000;
  return o;
}

const std::string kGetHealth = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";

TEST(HttpServer, AnswersAndKeepsTheConnectionAlive) {
  RunningServer s(options(), echo_routes());
  Client c(s.port());
  ASSERT_TRUE(c.connected());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello"));
    const std::string r = c.response();
    EXPECT_EQ(status_of(r), 200);
    EXPECT_EQ(body_of(r), "hello");
    EXPECT_NE(r.find("Connection: keep-alive"), std::string::npos);
  }
}

TEST(HttpServer, AnInvalidUtf8PathIsA404WithReplacementCharactersAndTheServerLives) {
  RunningServer s(options(), echo_routes());
  Client c(s.port());
  ASSERT_TRUE(c.send("GET /x%FF HTTP/1.1\r\nHost: t\r\n\r\n"));
  const std::string r = c.response();
  EXPECT_EQ(status_of(r), 404);
  EXPECT_NE(body_of(r).find("/x\xef\xbf\xbd"), std::string::npos) << r;  // U+FFFD
  Client again(s.port());
  ASSERT_TRUE(again.send(kGetHealth));
  EXPECT_EQ(status_of(again.response()), 200);
}

TEST(HttpServer, AHandlersExceptionIsA500AndTheServerLives) {
  RunningServer s(options(), echo_routes());
  Client c(s.port());
  ASSERT_TRUE(c.send("POST /throw HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n"));
  const std::string r = c.response();
  EXPECT_EQ(status_of(r), 500);
  EXPECT_NE(body_of(r).find("boom"), std::string::npos);
  ASSERT_TRUE(c.send(kGetHealth));
  EXPECT_EQ(status_of(c.response()), 200);
}

TEST(HttpServer, AWrongMethodIs405WithAllow) {
  RunningServer s(options(), echo_routes());
  Client c(s.port());
  ASSERT_TRUE(c.send("GET /echo HTTP/1.1\r\nHost: t\r\n\r\n"));
  const std::string r = c.response();
  EXPECT_EQ(status_of(r), 405);
  EXPECT_NE(r.find("Allow: POST\r\n"), std::string::npos) << r;
}

TEST(HttpServer, AChunkedBodyPastTheLimitIs413WithoutBeingBuffered) {
  RunningServer s(options(), echo_routes());
  Client c(s.port());
  ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"));
  // 64 MiB offered in 64 KiB chunks against a 1000-byte limit: the server answers after the
  // first chunk size line and closes; sending stops failing soon after, never at 64 MiB.
  const std::string chunk = "10000\r\n" + std::string(0x10000, 'a') + "\r\n";
  size_t sent = 0;
  while (sent < (size_t(64) << 20) && c.send(chunk)) sent += chunk.size();
  const std::string r = c.response();
  EXPECT_EQ(status_of(r), 413) << r;
  EXPECT_LT(sent, size_t(64) << 20) << "the server kept reading a body it had refused";
}

TEST(HttpServer, AContentLengthPastTheLimitIs413BeforeTheBodyIsSent) {
  RunningServer s(options(), echo_routes());
  Client c(s.port());
  ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1001\r\n\r\n"));
  EXPECT_EQ(status_of(c.response()), 413);
}

TEST(HttpServer, ConflictingContentLengthsAre400) {
  RunningServer s(options(), echo_routes());
  Client c(s.port());
  ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"));
  EXPECT_EQ(status_of(c.response()), 400);
  EXPECT_TRUE(c.closed_by_server());
}

TEST(HttpServer, ATricklingClientGets408WithinTheRequestTimeout) {
  ServerOptions o = options();
  o.request_timeout = std::chrono::milliseconds(300);
  RunningServer s(o, echo_routes());
  Client c(s.port());
  // A byte every 20 ms: each read is prompt, the request never ends. A per-read timeout would
  // keep the connection forever; the request deadline ends it.
  const std::string req = "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 900\r\n\r\n" + std::string(900, 'a');
  int status = 0;
  for (size_t i = 0; i < req.size() && status == 0; ++i) {
    if (!c.send(req.substr(i, 1))) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    char peek;
    if (::recv(c.fd(), &peek, 1, MSG_PEEK | MSG_DONTWAIT) == 1) status = status_of(c.response());
  }
  if (status == 0) status = status_of(c.response());
  EXPECT_EQ(status, 408);
}

TEST(HttpServer, IdleConnectionsAreShedSoHealthChecksStillAnswer) {
  ServerOptions o = options();
  o.max_connections = 8;
  RunningServer s(o, echo_routes());
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 40; ++i) {
    idle.push_back(std::make_unique<Client>(s.port()));
    ASSERT_TRUE(idle.back()->connected());
  }
  Client c(s.port());
  ASSERT_TRUE(c.send(kGetHealth));
  EXPECT_EQ(status_of(c.response()), 200);
  EXPECT_LE(s.server().stats().open_connections, 8);
  EXPECT_GE(s.server().stats().shed_connections, 32);
}

TEST(HttpServer, WhenEveryConnectionIsBusyANewcomerGets503) {
  ServerOptions o = options();
  o.max_connections = 4;
  Arrivals arrivals;
  RunningServer s(o, echo_routes(nullptr, &arrivals));
  // Four connections each in the middle of a request: none is idle, none may be shed.
  std::vector<std::unique_ptr<Client>> busy;
  for (int i = 0; i < 4; ++i) {
    busy.push_back(std::make_unique<Client>(s.port()));
    ASSERT_TRUE(busy.back()->send("POST /arrive HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc"));
  }
  arrivals.wait_started(4);  // the server has read all four heads
  Client late(s.port());
  late.send(kGetHealth);
  const std::string r = late.response();
  EXPECT_EQ(status_of(r), 503) << r;
  EXPECT_NE(r.find("Retry-After: 1"), std::string::npos);
}

TEST(HttpServer, InlineRoutesAnswerWhileEveryWorkerIsBusy) {
  Gate gate;
  ServerOptions o = options();
  o.workers = 1;
  RunningServer s(o, echo_routes(&gate));
  Client slow(s.port());
  ASSERT_TRUE(slow.send("POST /wait HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n"));
  gate.wait_for_waiters(1);
  Client health(s.port());
  ASSERT_TRUE(health.send(kGetHealth));
  EXPECT_EQ(status_of(health.response()), 200);
  gate.release();
  EXPECT_EQ(body_of(slow.response()), "done");
}

TEST(HttpServer, StopFinishesTheRequestInFlightAndDropsATricklingClient) {
  Gate gate;
  auto s = std::make_unique<RunningServer>(options(), echo_routes(&gate));
  Client working(s->port());
  ASSERT_TRUE(working.send("POST /wait HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n"));
  gate.wait_for_waiters(1);
  Client trickling(s->port());
  ASSERT_TRUE(trickling.send("POST /echo HTTP/1.1\r\nHost: t\r\n"));
  std::thread stopper([&] { s->stop(); });
  EXPECT_TRUE(trickling.closed_by_server());  // dropped at once: its request never started
  gate.release();
  const std::string r = working.response();
  EXPECT_EQ(status_of(r), 200);
  EXPECT_NE(r.find("Connection: close"), std::string::npos);
  stopper.join();  // returns: the test would time out otherwise
}

TEST(HttpServer, PipelinedRequestsAreAnsweredInOrder) {
  RunningServer s(options(), echo_routes());
  Client c(s.port());
  ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nA"
                     "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nB" + kGetHealth));
  EXPECT_EQ(body_of(c.response()), "A");
  EXPECT_EQ(body_of(c.response()), "B");
  EXPECT_EQ(status_of(c.response()), 200);
}

TEST(HttpServer, ExpectContinueGets100BeforeTheBody) {
  RunningServer s(options(), echo_routes());
  Client c(s.port());
  ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n"));
  EXPECT_EQ(c.response(), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(c.send("abc"));
  EXPECT_EQ(body_of(c.response()), "abc");
}

TEST(HttpServer, EveryAnnouncedArrivalIsFinishedExactlyOnce) {
  Arrivals arrivals;
  {
    RunningServer s(options(), echo_routes(nullptr, &arrivals));
    Client c(s.port());
    ASSERT_TRUE(c.send("POST /arrive HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nab"));
    EXPECT_EQ(status_of(c.response()), 200);
    EXPECT_EQ(arrivals.finished.load(), 1);
    // Abandoned before its body arrived: the server finishes the announcement itself.
    Client gone(s.port());
    ASSERT_TRUE(gone.send("POST /arrive HTTP/1.1\r\nHost: t\r\nContent-Length: 20\r\n\r\nab"));
    arrivals.wait_started(2);
  }
  EXPECT_EQ(arrivals.started.load(), 2);
  EXPECT_EQ(arrivals.finished.load(), 2);
}

TEST(HttpServer, SecondServerOnTheSamePortFailsToBind) {
  RunningServer s(options(), echo_routes());
  ServerOptions o = options();
  o.host = "127.0.0.1";
  o.port = s.port();
  Server second(o, echo_routes());
  const Status st = second.bind();
  EXPECT_EQ(st.code(), StatusCode::busy) << st.message();
}

}  // namespace
}  // namespace mixprec::http
