// message.h: a response as the bytes sent on the wire (message.cpp).
#pragma once
#include <string>

#include "mixprec/http/http.h"

namespace mixprec::http {

// Status line, Server, Content-Type, Content-Length, the response's own headers (any with CR
// or LF dropped), Connection, then the body (not for a HEAD request).
std::string serialize_response(const Response& response, bool keep_alive, bool head_only);

}  // namespace mixprec::http
