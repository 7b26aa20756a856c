// http_fuzz_target.h: the http_request fuzz target (tests/fuzz/http_request_fuzz.cpp; replayed
// by fuzz_corpus_replay_test), kept beside fuzz_targets.h, which includes it. The server's
// parser reads whatever bytes a client sends, in whatever pieces the network delivers them.
#pragma once
#include <string>
#include <string_view>

#include "http/request_parser.h"

namespace mixprec::fuzz {

struct HttpOutcome {
  bool complete = false;
  int status = 0;
  size_t consumed = 0;
  http::Request request;
};

// Feeds `bytes` to a parser in pieces of `piece` bytes, as the server's reads would.
inline HttpOutcome http_parse(std::string_view bytes, size_t piece, const http::Limits& limits) {
  http::RequestParser p(limits);
  std::string pending;
  size_t offered = 0;
  HttpOutcome o;
  while (offered < bytes.size() && !p.complete() && !p.failed()) {
    const size_t n = std::min(piece, bytes.size() - offered);
    pending.append(bytes.substr(offered, n));
    offered += n;
    const size_t used = p.feed(pending);
    if (used > pending.size()) return o;  // reported by the caller as a violation
    o.consumed += used;
    pending.erase(0, used);
  }
  o.complete = p.complete();
  o.status = p.failed() ? p.error_status() : 0;
  if (p.failed() && p.error_message().empty()) o.status = -1;
  o.request = p.request();
  return o;
}

inline std::string http_differs(const HttpOutcome& a, const HttpOutcome& b) {
  if (a.complete != b.complete || a.status != b.status) return "the outcome";
  if (!a.complete) return {};
  if (a.consumed != b.consumed) return "the bytes consumed";
  if (a.request.method != b.request.method || a.request.path != b.request.path || a.request.target != b.request.target)
    return "the request line";
  if (a.request.query != b.request.query) return "the query";
  if (a.request.headers != b.request.headers) return "the headers";
  if (a.request.body != b.request.body) return "the body";
  return {};
}

// The first byte sets the piece size (1..16); the rest is what a client sent. The contract:
// the same request whether fed at once or in pieces; a refusal is one of the statuses
// RFC 9110 gives these faults, with a message; an accepted request respects every limit,
// and written out again (HTTP/1.1, Content-Length framing) parses to the same request.
inline Violation http_request(const uint8_t* data, size_t size, bool* accepted = nullptr) {
  set(accepted, false);
  if (size == 0) return {};
  const size_t piece = 1 + data[0] % 16;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  http::Limits limits;
  limits.max_body_bytes = 512;
  limits.max_request_line_bytes = 256;
  limits.max_header_bytes = 1024;
  limits.max_header_fields = 16;
  const HttpOutcome whole = http_parse(bytes, bytes.size() + 1, limits);
  const HttpOutcome pieces = http_parse(bytes, piece, limits);
  if (std::string d = http_differs(whole, pieces); !d.empty())
    return "http_request: " + d + " depends on how the bytes were split (pieces of " + std::to_string(piece) + ")";
  if (whole.status != 0) {
    for (int s : {400, 413, 414, 417, 431, 501, 505})
      if (whole.status == s) return {};
    return "http_request: refused with status " + std::to_string(whole.status);
  }
  if (!whole.complete) return {};
  const http::Request& r = whole.request;
  if (whole.consumed > bytes.size()) return "http_request: consumed more bytes than it was given";
  if (int64_t(r.body.size()) > limits.max_body_bytes) return "http_request: a body past the limit";
  if (int64_t(r.headers.size()) > limits.max_header_fields) return "http_request: more header fields than the limit";
  if (r.path.empty() || r.path[0] != '/') return "http_request: a path that does not start with /";
  std::string again = r.method + " " + r.target + " HTTP/1.1\r\n";
  bool host = false;
  for (const auto& [name, value] : r.headers) {
    if (name == "content-length" || name == "transfer-encoding") continue;
    host = host || name == "host";
    again += name + ": " + value + "\r\n";
  }
  if (!host) again += "host: h\r\n";
  again += "content-length: " + std::to_string(r.body.size()) + "\r\n\r\n" + r.body;
  http::Limits roomy = limits;
  roomy.max_header_bytes += 64;
  roomy.max_header_fields += 2;
  const HttpOutcome re = http_parse(again, again.size() + 1, roomy);
  if (!re.complete) return "http_request: the request written out again was refused (" + std::to_string(re.status) + ")";
  if (re.request.method != r.method || re.request.path != r.path || re.request.query != r.query || re.request.body != r.body)
    return "http_request: the request written out again parses differently";
  set(accepted, true);
  return {};
}

}  // namespace mixprec::fuzz
