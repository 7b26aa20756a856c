// mixprec/http/http.h: mixprec's HTTP/1.1 server (issue 31): what `mixprec serve` answers with, and
// any other local web service of mixprec's. It is mixprec's own because every request
// resource has to be bounded, which Debian's cpp-httplib 0.11 could not do: a chunked body
// was buffered whole past the body limit, the timeout was per read (a client sending a byte a
// second held a thread forever), idle connections queued without bound in front of the
// health check, and conflicting Content-Length headers were accepted.
//
// The bounds, each enforced here (tests/unit/http, tests/e2e/serve_hostile_test.sh):
//  - a request line of at most 8 KiB (414), a header section of at most 16 KiB and 100 fields
//    (431), a body of at most max_body_bytes whether sent with Content-Length or chunked (413,
//    answered before the body is read);
//  - a whole request within request_timeout of its first byte, a response written within
//    write_timeout, an idle keep-alive connection closed after idle_timeout (408 / close);
//  - at most max_connections open connections: beyond it the longest-idle connection is
//    closed, or the newcomer gets 503; bodies held at once at most max_buffered_body_bytes;
//  - stop() ends within write_timeout plus the longest running handler, whatever clients do.
// Requests are framed strictly (RFC 9112): Content-Length and Transfer-Encoding together,
// two different Content-Lengths, an unknown transfer coding, a field name with white space
// before its colon, a folded field line, or an HTTP/1.1 request without Host are refused
// with 400 (or 501), so a proxy in front and this server cannot disagree on where a request
// ends.
//
// One I/O thread (epoll) reads and writes every connection without blocking, so idle or slow
// clients cost a buffer, never a thread; complete requests go to a pool of worker threads,
// except the routes marked `inline`, which the I/O thread answers itself: a health check
// answers even when every worker waits on the model. Linux only.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mixprec/core/status.h"

namespace mixprec::http {

// One request as a handler sees it. `path` and query values are percent-decoded bytes: they
// need not be UTF-8 (json_error serialises them with U+FFFD for invalid bytes).
struct Request {
  std::string method, target, path;        // target: as sent ("/v1/predict?top_k=3")
  std::multimap<std::string, std::string> query;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, in order
  std::string body;                        // de-chunked
  std::string remote;                      // "address:port" of the client

  // The first value of a header (name in any case), or "".
  std::string header(std::string_view name) const;
  bool has_query(std::string_view key) const;
  std::string query_value(std::string_view key) const;  // the first value, or ""

  // The route's on_arrival finisher (see Route). A handler calls it once it no longer needs
  // the announcement (serve: once its samples are queued); the server calls it after the
  // handler otherwise, or when the request is abandoned before its handler ran.
  std::function<void()> finish_arrival;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers (Retry-After, ...)
  void set_header(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
};

// {"error": message} with a newline, invalid UTF-8 replaced by U+FFFD (messages quote paths and
// values the client sent, which may be any bytes). Never throws.
std::string json_error(std::string_view message);
// The response of an error: `status` and json_error(message).
Response error_response(int status, std::string_view message);
// "Not Found" for 404, ... (the reason phrase of a status code; "Unknown" for others).
const char* reason_phrase(int status);

using Handler = std::function<void(Request&, Response&)>;

struct Route {
  std::string method, path;  // exact match; a path with other methods only gets 405 + Allow
  Handler handler;
  // Answered on the I/O thread, never queued behind the workers: for cheap handlers that must
  // stay responsive (health checks, metrics). It must not block.
  bool inline_on_io_thread = false;
  // Called on the I/O thread when a request's head for this route has been read, before its
  // body: returns the finisher (Request::finish_arrival). Lets a batcher wait for a request
  // whose body is still arriving.
  std::function<std::function<void()>()> on_arrival;
};

struct Limits {
  int64_t max_request_line_bytes = 8 << 10;
  int64_t max_header_bytes = 16 << 10;  // the whole header section (and a chunked body's trailers)
  int64_t max_header_fields = 100;
  int64_t max_body_bytes = 16 << 20;
  std::string body_limit_flag;  // named in the 413's message when set ("--max-body-bytes")
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (Server::port() says which)
  int64_t workers = 8;
  int64_t max_connections = 512;
  int64_t max_buffered_body_bytes = 256 << 20;  // all connections' bodies being read, together
  std::chrono::milliseconds request_timeout{10'000};  // first byte of a request to its last
  std::chrono::milliseconds write_timeout{10'000};    // a response, start to end
  std::chrono::milliseconds idle_timeout{5'000};      // a connection waiting for a request
  Limits limits;
  // Called after every response (handlers', and the server's own 400/408/413/431/503...),
  // from the I/O thread: the request as far as it was read (path may be empty), the status
  // and the seconds from the request's first byte to its response being queued.
  std::function<void(const Request&, int status, double seconds)> on_response;
};

class Server {
 public:
  Server(ServerOptions options, std::vector<Route> routes);
  ~Server();  // stop() and wait
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens (SO_REUSEADDR, no SO_REUSEPORT: a second server on a port in use fails
  // here rather than sharing it). Errors: busy (address in use), invalid_argument (host).
  Status bind();
  int port() const;
  // Serves until stop(); returns the I/O thread's fatal error, if any.
  Status run();
  // From any thread (not from a signal handler): stop accepting, close idle connections and
  // those still sending a request, finish the requests being handled and write their
  // answers (bounded by write_timeout), then run() returns.
  void stop();

  struct Stats {
    int64_t open_connections = 0, requests = 0, shed_connections = 0;
  };
  Stats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mixprec::http
