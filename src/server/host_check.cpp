// Host header checks: see host_check.h.
#include "server/host_check.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cctype>

namespace specula {

namespace {

std::string lower(std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

}  // namespace

bool is_loopback_host(const std::string& host) {
    in_addr a4{};
    if (inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    const std::string h = lower(host);
    return h == "::1" || h == "[::1]" || h == "localhost";
}

bool host_header_allowed(const std::string& host_header, const std::string& bind_host) {
    if (host_header.empty()) return true;  // HTTP/1.0 clients; every browser sends one
    std::string h = lower(host_header);
    if (h.front() == '[') {  // [IPv6]:port
        const size_t close = h.find(']');
        if (close == std::string::npos) return false;
        in6_addr a6{};
        const std::string rest = h.substr(close + 1);
        return inet_pton(AF_INET6, h.substr(1, close - 1).c_str(), &a6) == 1 &&
               (rest.empty() || rest.front() == ':');
    }
    if (const size_t colon = h.rfind(':'); colon != std::string::npos) h.resize(colon);
    in_addr a4{};
    if (inet_pton(AF_INET, h.c_str(), &a4) == 1) return true;
    if (h == "localhost" || h.ends_with(".localhost")) return true;
    return !h.empty() && h == lower(bind_host);
}

}  // namespace specula
