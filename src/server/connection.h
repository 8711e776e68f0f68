// The HTTP server's connection limits, enforced below cpp-httplib's request parsing:
//
//   * at most `max_connections` connections are served at once, each on its own thread (created
//     on demand, kept for reuse); one more is answered 503 at once and closed, never queued, so
//     clients that hold connections open cannot starve the others of threads unnoticed;
//   * a request's line, headers and body must all arrive within `read_deadline_s` of its first
//     byte, however slowly they drip (a per-read timeout alone resets on every byte: slow-loris);
//   * a request takes at most `max_request_bytes` off the wire (head, chunk framing and body;
//     the server sets it from its body limit), so a never-ending header line is cut off too;
//   * an idle keep-alive connection is closed after `keep_alive_s`.
//
// The body size limit is the request handler's (server.cpp counts the bytes after decoding);
// when it stops reading a body part-way it calls close_after_response(), so that the unread rest
// is never parsed as a next request.
#pragma once

#include <httplib.h>

#include <atomic>
#include <functional>

namespace specula {

struct ConnectionLimits {
    int max_connections = 256;    // --max-connections, 1 .. kMaxConnectionsLimit
    double read_deadline_s = 10;  // --read-deadline, kMinReadDeadline .. kMaxReadDeadline s
    size_t max_request_bytes = size_t(16) << 20;
    double keep_alive_s = 5;
    double write_timeout_s = 5;  // one send may block this long (a client that stopped reading)
};

constexpr int kMaxConnectionsLimit = 4096;  // each open connection holds a thread
constexpr double kMinReadDeadline = 0.1, kMaxReadDeadline = 3600;

// Throws Error naming the flag (--max-connections, --read-deadline) when a limit is out of range.
void check_connection_limits(const ConnectionLimits& limits);

class LimitedServer : public httplib::Server {
  public:
    explicit LimitedServer(const ConnectionLimits& limits);  // check_connection_limits first

    // Called for each connection refused because max_connections are open (on the accept
    // thread; keep it short).
    std::function<void()> on_refused;

    // The connection being served on this thread closes once its response is written.
    static void close_after_response();

    int open_connections() const { return open_.load(); }

    // After bind: a listen backlog of max_connections (httplib's is 5, so a burst of clients
    // would wait on SYN retransmits of a second or more).
    void widen_backlog();

  private:
    bool process_and_close_socket(socket_t sock) override;  // httplib's hook, per connection
    void refuse(socket_t sock);

    ConnectionLimits limits_;
    std::atomic<int> open_{0};
};

}  // namespace specula
