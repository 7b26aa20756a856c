// request_parser.h: an HTTP/1.1 request read incrementally from whatever bytes have arrived,
// with every part bounded (http::Limits) and framed strictly (RFC 9112 sections 2-7): the
// server's I/O thread feeds it each read; the fuzz harness (tests/fuzz/http_request_fuzz.cpp)
// feeds it hostile bytes in random splits. No allocation grows beyond the limits: a line is
// kept only up to its limit, a body only up to max_body_bytes.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "mixprec/http/http.h"

namespace mixprec::http {

class RequestParser {
 public:
  explicit RequestParser(const Limits& limits) : limits_(limits) {}

  // Reads from the front of `in` as far as the request goes; returns the bytes consumed (the
  // rest belongs to the next request, or is an incomplete line to be fed again with more).
  // After complete() or failed(), consumes nothing.
  size_t feed(std::string_view in);

  // The request line and headers are read (the body may still be arriving).
  bool head_done() const { return state_ > State::headers; }
  bool complete() const { return state_ == State::complete; }
  bool failed() const { return state_ == State::failed; }
  // When failed(): the status to answer (400, 413, 414, 417, 431, 501, 505) and why.
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

  // Valid once head_done(): the client sent "Expect: 100-continue" and a body is coming.
  bool expects_continue() const { return expects_continue_ && state_ < State::complete; }
  // HTTP/1.1 without "Connection: close", or HTTP/1.0 with "Connection: keep-alive".
  bool keep_alive() const { return keep_alive_; }
  // A body of this many bytes was announced by Content-Length (0 for none, -1 for chunked).
  int64_t content_length() const { return content_length_; }
  // Bytes of the body received so far.
  int64_t body_bytes() const { return int64_t(request_.body.size()); }

  Request& request() { return request_; }
  // Forgets everything, for the next request on the connection.
  void reset();

 private:
  enum class State { request_line, headers, body, chunk_size, chunk_data, chunk_end, trailers, complete, failed };

  // Takes one line (without its CRLF or LF) from `in` at `pos`; false when the line is not
  // complete yet (or too long: then failed() with `too_long_status`).
  bool take_line(std::string_view in, size_t& pos, std::string_view& line, int64_t limit, int too_long_status,
                 const char* what);
  void parse_request_line(std::string_view line);
  void parse_header_line(std::string_view line);
  void finish_head();
  void parse_chunk_size(std::string_view line);
  void fail(int status, std::string message);
  std::string body_limit() const;  // "the limit of N bytes (--flag)"

  const Limits limits_;
  State state_ = State::request_line;
  Request request_;
  int error_status_ = 0;
  std::string error_message_;
  bool http11_ = true, keep_alive_ = true, expects_continue_ = false;
  int64_t content_length_ = 0;    // -1: chunked
  int64_t chunk_remaining_ = 0;
  int64_t header_bytes_ = 0;      // of the header section, or of the trailers
  int64_t header_fields_ = 0;
};

// Percent-decodes `s` ('+' as a space too when `plus_is_space`); false on a malformed escape.
bool percent_decode(std::string_view s, bool plus_is_space, std::string& out);

}  // namespace mixprec::http
