// Which Host header values a server without an API key answers (against DNS rebinding: a page
// whose name was re-pointed at this machine sends its own name as Host), and what counts as a
// loopback bind (the startup warning).
#pragma once

#include <string>

namespace specula {

// Whether a Host header value may reach a server bound to `bind_host` without an API key: an
// IP literal, localhost (or *.localhost) or the bound name itself, with any port; or no header.
bool host_header_allowed(const std::string& host_header, const std::string& bind_host);

// Whether `host` is a loopback address or name (127.0.0.0/8, ::1, localhost).
bool is_loopback_host(const std::string& host);

}  // namespace specula
