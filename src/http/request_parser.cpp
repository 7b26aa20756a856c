// request_parser.cpp: see request_parser.h. Every refusal names what was wrong: the client
// gets it in the JSON error, and a fuzz finding is easier to read.
#include "http/request_parser.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace mixprec::http {

namespace {

// RFC 9110 5.6.2: the characters of a token (method, field name, transfer coding).
bool is_tchar(unsigned char c) {
  if (std::isalnum(c)) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+': case '-':
    case '.': case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_tchar(static_cast<unsigned char>(c)); });
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The comma-separated elements of a field value, trimmed; empty elements dropped (RFC 9110 5.6.1).
std::vector<std::string_view> list_elements(std::string_view v) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= v.size()) {
    size_t comma = v.find(',', start);
    if (comma == std::string_view::npos) comma = v.size();
    std::string_view e = trim(v.substr(start, comma - start));
    if (!e.empty()) out.push_back(e);
    start = comma + 1;
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A printable rendering of a client's bytes for an error message, at most 60 of them.
std::string quoted(std::string_view s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 60; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += char(c);
    } else {
      static const char* digits = "0123456789abcdef";
      out += "\\x";
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  if (s.size() > 60) out += "...";
  return out + "'";
}

}  // namespace

bool percent_decode(std::string_view s, bool plus_is_space, std::string& out) {
  out.clear();
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size()) return false;
      const int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out += char(hi * 16 + lo);
      i += 2;
    } else {
      out += (plus_is_space && c == '+') ? ' ' : c;
    }
  }
  return true;
}

void RequestParser::reset() {
  state_ = State::request_line;
  request_ = Request{};
  error_status_ = 0;
  error_message_.clear();
  http11_ = keep_alive_ = true;
  expects_continue_ = false;
  content_length_ = chunk_remaining_ = header_bytes_ = header_fields_ = 0;
}

std::string RequestParser::body_limit() const {
  std::string s = "the limit of " + std::to_string(limits_.max_body_bytes) + " bytes";
  return limits_.body_limit_flag.empty() ? s : s + " (" + limits_.body_limit_flag + ")";
}

void RequestParser::fail(int status, std::string message) {
  state_ = State::failed;
  error_status_ = status;
  error_message_ = std::move(message);
  keep_alive_ = false;  // the request's end is unknown: the connection cannot be reused
}

bool RequestParser::take_line(std::string_view in, size_t& pos, std::string_view& line, int64_t limit,
                              int too_long_status, const char* what) {
  const auto too_long = [&] { fail(too_long_status, std::string(what) + " longer than " + std::to_string(limit) + " bytes"); };
  const size_t lf = in.find('\n', pos);
  if (lf == std::string_view::npos) {
    // Not complete yet: refused as soon as even a final CR could not make it fit.
    if (int64_t(in.size() - pos) > limit + 1) too_long();
    return false;
  }
  line = in.substr(pos, lf - pos);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  // The limit is on the line's content, however it ends (CRLF or a bare LF): the same line is
  // accepted or refused whichever way it is terminated.
  if (int64_t(line.size()) > limit) {
    too_long();
    return false;
  }
  // A bare CR inside a line is refused (RFC 9112 2.2: it could end a line for another parser).
  if (line.find('\r') != std::string_view::npos) {
    fail(400, std::string(what) + " holds a bare CR");
    return false;
  }
  pos = lf + 1;
  return true;
}

size_t RequestParser::feed(std::string_view in) {
  size_t pos = 0;
  while (pos < in.size() && state_ != State::complete && state_ != State::failed) {
    std::string_view line;
    switch (state_) {
      case State::request_line: {
        // RFC 9112 2.2: empty lines before a request line are ignored (robustness), a few.
        if (!take_line(in, pos, line, limits_.max_request_line_bytes, 414, "the request line")) return pos;
        if (line.empty()) {
          if (++header_fields_ > 4) fail(400, "empty lines instead of a request line");
          continue;
        }
        header_fields_ = 0;
        parse_request_line(line);
        break;
      }
      case State::headers:
      case State::trailers: {
        const int64_t room = limits_.max_header_bytes - header_bytes_;
        if (!take_line(in, pos, line, std::max<int64_t>(room, 0), 431,
                       state_ == State::headers ? "the header section" : "the chunked body's trailer section"))
          return pos;
        header_bytes_ += int64_t(line.size()) + 2;
        if (line.empty()) {
          if (state_ == State::headers) {
            finish_head();
          } else {
            state_ = State::complete;
          }
          break;
        }
        if (++header_fields_ > limits_.max_header_fields) {
          fail(431, "more than " + std::to_string(limits_.max_header_fields) + " header fields");
          break;
        }
        if (state_ == State::headers) {
          parse_header_line(line);
        } else if (line.find(':') == std::string_view::npos || line.front() == ' ' || line.front() == '\t') {
          fail(400, "a malformed trailer field " + quoted(line));  // trailers are read and dropped
        }
        break;
      }
      case State::body: {
        const size_t n = std::min<size_t>(in.size() - pos, size_t(content_length_ - body_bytes()));
        request_.body.append(in.substr(pos, n));
        pos += n;
        if (body_bytes() == content_length_) state_ = State::complete;
        break;
      }
      case State::chunk_size: {
        if (!take_line(in, pos, line, limits_.max_request_line_bytes, 400, "a chunk-size line")) return pos;
        parse_chunk_size(line);
        break;
      }
      case State::chunk_data: {
        const size_t n = std::min<size_t>(in.size() - pos, size_t(chunk_remaining_));
        request_.body.append(in.substr(pos, n));
        pos += n;
        chunk_remaining_ -= int64_t(n);
        if (chunk_remaining_ == 0) state_ = State::chunk_end;
        break;
      }
      case State::chunk_end: {
        // CRLF (or a bare LF) after a chunk's data, nothing else.
        if (in[pos] == '\n') {
          pos += 1;
        } else if (in[pos] == '\r' && pos + 1 == in.size()) {
          return pos;  // the LF has not arrived yet
        } else if (in[pos] == '\r' && in[pos + 1] == '\n') {
          pos += 2;
        } else {
          fail(400, "a chunk's data is longer than its size says (no CRLF after it)");
          break;
        }
        state_ = State::chunk_size;
        break;
      }
      case State::complete:
      case State::failed:
        break;
    }
  }
  return pos;
}

void RequestParser::parse_request_line(std::string_view line) {
  // method SP request-target SP HTTP-version, single spaces (RFC 9112 3).
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return fail(400, "a malformed request line " + quoted(line) + " (expected: METHOD /path HTTP/1.1)");
  const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                         version = line.substr(sp2 + 1);
  if (!is_token(method)) return fail(400, "a malformed method " + quoted(method));
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !std::isdigit(static_cast<unsigned char>(version[5])) ||
      version[6] != '.' || !std::isdigit(static_cast<unsigned char>(version[7])))
    return fail(400, "a malformed HTTP version " + quoted(version) + " (expected HTTP/1.1 or HTTP/1.0)");
  if (version != "HTTP/1.1" && version != "HTTP/1.0")
    return fail(505, "HTTP version " + quoted(version) + " is not supported (HTTP/1.1 or HTTP/1.0)");
  http11_ = version == "HTTP/1.1";
  keep_alive_ = http11_;
  for (char c : target) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f)
      return fail(400, "the request target " + quoted(target) + " holds a byte that must be percent-encoded");
  }
  std::string_view origin = target;
  // The absolute form (a request through a proxy): the path and query after the authority.
  for (std::string_view scheme : {"http://", "https://"}) {
    if (origin.size() >= scheme.size() && lower(origin.substr(0, scheme.size())) == scheme) {
      const size_t slash = origin.find('/', scheme.size());
      origin = slash == std::string_view::npos ? std::string_view("/") : origin.substr(slash);
    }
  }
  if (origin.empty() || origin.front() != '/')
    return fail(400, "the request target " + quoted(target) + " is not a path (expected it to start with /)");
  const size_t question = origin.find('?');
  if (!percent_decode(origin.substr(0, question), false, request_.path))
    return fail(400, "the path " + quoted(origin.substr(0, question)) + " holds a malformed %-escape");
  if (question != std::string_view::npos) {
    std::string_view rest = origin.substr(question + 1);
    const size_t hash = rest.find('#');
    if (hash != std::string_view::npos) rest = rest.substr(0, hash);
    while (!rest.empty()) {
      const size_t amp = rest.find('&');
      const std::string_view pair = rest.substr(0, amp);
      rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
      if (pair.empty()) continue;
      const size_t eq = pair.find('=');
      std::string key, value;
      if (!percent_decode(pair.substr(0, eq), true, key) ||
          (eq != std::string_view::npos && !percent_decode(pair.substr(eq + 1), true, value)))
        return fail(400, "the query parameter " + quoted(pair) + " holds a malformed %-escape");
      request_.query.emplace(std::move(key), std::move(value));
    }
  }
  request_.method.assign(method);
  request_.target.assign(target);
  state_ = State::headers;
}

void RequestParser::parse_header_line(std::string_view line) {
  if (line.front() == ' ' || line.front() == '\t')
    return fail(400, "a folded header line (obsolete line folding is refused, RFC 9112 5.2)");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return fail(400, "a header line without a colon: " + quoted(line));
  const std::string_view name = line.substr(0, colon);
  if (!is_token(name))
    return fail(400, "a malformed header name " + quoted(name) +
                         (name.find_first_of(" \t") != std::string_view::npos ? " (white space before the colon)" : ""));
  const std::string_view value = trim(line.substr(colon + 1));
  for (char c : value) {
    const unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && u != '\t') || u == 0x7f)
      return fail(400, "the header " + std::string(name) + " holds a control character");
  }
  request_.headers.emplace_back(lower(name), std::string(value));
}

void RequestParser::finish_head() {
  bool chunked = false, has_length = false, has_te = false;
  int hosts = 0;
  int64_t length = 0;
  for (const auto& [name, value] : request_.headers) {
    if (name == "host") {
      ++hosts;
    } else if (name == "content-length") {
      // Several Content-Length fields, or a list, must all say the same number (RFC 9112 6.3).
      const auto elements = list_elements(value);
      if (elements.empty()) return fail(400, "an empty Content-Length");
      for (std::string_view e : elements) {
        if (e.size() > 18 || !std::all_of(e.begin(), e.end(), [](char c) { return c >= '0' && c <= '9'; }))
          return fail(400, "Content-Length " + quoted(e) + " is not a byte count");
        const int64_t n = std::stoll(std::string(e));
        if (has_length && n != length)
          return fail(400, "conflicting Content-Length values (" + std::to_string(length) + " and " + std::to_string(n) + ")");
        length = n;
        has_length = true;
      }
    } else if (name == "transfer-encoding") {
      has_te = true;
      for (std::string_view coding : list_elements(value)) {
        if (lower(coding) != "chunked")
          return fail(501, "transfer coding " + quoted(coding) + " is not supported (only chunked)");
        if (chunked) return fail(400, "chunked applied twice in Transfer-Encoding");
        chunked = true;
      }
    } else if (name == "connection") {
      for (std::string_view option : list_elements(value)) {
        const std::string o = lower(option);
        if (o == "close") keep_alive_ = false;
        if (o == "keep-alive" && !http11_) keep_alive_ = true;
      }
    } else if (name == "expect") {
      if (lower(value) != "100-continue") return fail(417, "Expect " + quoted(value) + " (only 100-continue is known)");
      expects_continue_ = true;
    }
  }
  // RFC 9112 3.2: more than one Host is refused whatever the version; none only in HTTP/1.1.
  if (hosts > 1) return fail(400, "more than one Host header");
  if (http11_ && hosts == 0) return fail(400, "an HTTP/1.1 request without a Host header");
  if (has_te && has_length) return fail(400, "both Transfer-Encoding and Content-Length (refused: request smuggling)");
  if (has_te && !http11_) return fail(400, "Transfer-Encoding in an HTTP/1.0 request");
  if (has_te && !chunked) return fail(400, "an empty Transfer-Encoding");
  if (has_length && length > limits_.max_body_bytes)
    return fail(413, "the body (" + std::to_string(length) + " bytes) is larger than " + body_limit());
  header_bytes_ = header_fields_ = 0;
  if (chunked) {
    content_length_ = -1;
    state_ = State::chunk_size;
  } else {
    content_length_ = length;
    state_ = length > 0 ? State::body : State::complete;
  }
  if (state_ == State::complete) expects_continue_ = false;
}

void RequestParser::parse_chunk_size(std::string_view line) {
  std::string_view digits = line.substr(0, line.find(';'));  // chunk extensions are ignored
  while (!digits.empty() && (digits.back() == ' ' || digits.back() == '\t')) digits.remove_suffix(1);
  if (digits.empty() || digits.size() > 15)
    return fail(400, "a malformed chunk size " + quoted(line));
  int64_t size = 0;
  for (char c : digits) {
    const int v = hex_value(c);
    if (v < 0) return fail(400, "a malformed chunk size " + quoted(line));
    size = size * 16 + v;
  }
  if (size > limits_.max_body_bytes - body_bytes())
    return fail(413, "the chunked body is larger than " + body_limit());
  if (size == 0) {
    state_ = State::trailers;
  } else {
    chunk_remaining_ = size;
    state_ = State::chunk_data;
  }
}

}  // namespace mixprec::http
