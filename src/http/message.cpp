// message.cpp: the parts of mixprec/http/http.h that are about messages, not connections: a
// request's header and query look-ups, error bodies, reason phrases, and a response's bytes.
#include <nlohmann/json.hpp>

#include "http/message.h"
#include "mixprec/http/http.h"

namespace mixprec::http {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

}  // namespace

std::string Request::header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (iequals(n, name)) return v;
  return "";
}

bool Request::has_query(std::string_view key) const { return query.find(std::string(key)) != query.end(); }

std::string Request::query_value(std::string_view key) const {
  const auto it = query.find(std::string(key));
  return it == query.end() ? "" : it->second;
}

std::string json_error(std::string_view message) {
  // error_handler_t::replace: a client's bytes quoted in the message need not be UTF-8, and
  // nlohmann's default (strict) would throw from inside an error path.
  return nlohmann::json({{"error", std::string(message)}}).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n";
}

Response error_response(int status, std::string_view message) {
  Response r;
  r.status = status;
  r.body = json_error(message);
  return r;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

std::string serialize_response(const Response& r, bool keep_alive, bool head_only) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + reason_phrase(r.status) + "\r\n";
  out += "Server: mixprec\r\n";
  if (!r.content_type.empty()) out += "Content-Type: " + r.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  for (const auto& [name, value] : r.headers) {
    // A handler's header holding CR or LF would split the response: dropped, never sent.
    if (name.find_first_of("\r\n:") != std::string::npos || value.find_first_of("\r\n") != std::string::npos) continue;
    out += name + ": " + value + "\r\n";
  }
  out += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  if (!head_only) out += r.body;
  return out;
}

}  // namespace mixprec::http
