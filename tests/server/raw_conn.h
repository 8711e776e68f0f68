// Test helper: a raw TCP connection to a loopback server, with no HTTP library in the way
// (for requests no client library would send), optionally from another loopback address.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>

namespace specula::test {

// A raw TCP connection to the server (no HTTP library in the way).
class RawConn {
  public:
    // from: the local address to connect from (127.0.0.2 ... are other clients on loopback).
    explicit RawConn(int port, const char* from = nullptr) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        if (fd_ >= 0 && from) {
            sockaddr_in l{};
            l.sin_family = AF_INET;
            ::inet_pton(AF_INET, from, &l.sin_addr);
            if (::bind(fd_, reinterpret_cast<sockaddr*>(&l), sizeof l) != 0)
                throw std::runtime_error(std::string("cannot bind to ") + from);
        }
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(uint16_t(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
            throw std::runtime_error("cannot connect to 127.0.0.1:" + std::to_string(port));
    }
    ~RawConn() {
        if (fd_ >= 0) ::close(fd_);
    }
    RawConn(const RawConn&) = delete;
    RawConn& operator=(const RawConn&) = delete;

    bool send_all(const std::string& s) {
        size_t off = 0;
        while (off < s.size()) {
            const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
            if (n <= 0) return false;
            off += size_t(n);
        }
        return true;
    }
    // Everything the server sends until it closes the connection or `timeout_s` pass.
    std::string read_until_close(double timeout_s) {
        std::string out;
        const auto end =
            std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
        while (std::chrono::steady_clock::now() < end) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0) continue;
            char buf[4096];
            const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n <= 0) {
                closed_ = true;
                break;
            }
            out.append(buf, size_t(n));
        }
        return out;
    }
    // What has arrived within `timeout_s` (at most one read).
    std::string read_some(double timeout_s) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, int(timeout_s * 1000)) <= 0) return "";
        char buf[4096];
        const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
        if (n <= 0) {
            closed_ = true;
            return "";
        }
        return std::string(buf, size_t(n));
    }
    // True once the server has closed its end (a read returns EOF or an error), without waiting.
    bool closed_by_server() {
        if (closed_) return true;
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 0) <= 0) return false;
        char buf[4096];
        const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
        closed_ = n <= 0;
        return closed_;
    }

  private:
    int fd_ = -1;
    bool closed_ = false;
};

}  // namespace specula::test
