// The HTTP server's connection limits, enforced below cpp-httplib's request parsing:
//
//   * at most `max_connections` connections are served at once, each on its own thread (created
//     on demand, kept for reuse); one more is answered 503 at once and closed, never queued, so
//     clients that hold connections open cannot starve the others of threads unnoticed;
//   * a request's line, headers and body must all arrive within `read_deadline_s` of its first
//     byte, however slowly they drip (a per-read timeout alone resets on every byte: slow-loris);
//   * a request takes at most `max_request_bytes` off the wire (head, chunk framing and body;
//     the server sets it from its body limit), so a never-ending header line is cut off too;
//   * an idle keep-alive connection is closed after `keep_alive_s`;
//   * one client (a peer IP address) holds at most its share of the cap, `max_per_client`
//     (default half the cap): a connection past the share closes that client's longest-idle one
//     (its own pool churning), or is answered 503 when none of its connections is idle;
//   * near the cap (past 7/8 of it) each new connection closes one idle connection first, the
//     longest idle of the client holding the most, so idle sockets (accepted, no request yet, or
//     between keep-alive requests) never keep another client out. Connections mid-request are
//     bounded by the read deadline instead. Behind a balancer every request comes from its
//     address: give it the whole cap (--max-connections-per-client = --max-connections).
//   * one budget over all clients for connections whose request head (line and headers, up to
//     the blank line) has started but not ended, `pending_heads_budget()` (half the cap): past
//     it, the oldest unfinished head of the client holding the most is closed, so sockets that
//     drip headers from any number of addresses hold at most half the cap and other clients'
//     requests keep being answered. A head sent in one piece is unfinished for microseconds.
//
// The body size limit is the request handler's (server.cpp counts the bytes after decoding);
// when it stops reading a body part-way it calls close_after_response(), so that the unread rest
// is never parsed as a next request.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <list>
#include <mutex>
#include <string>

#include "common/clock.h"

namespace specula {

struct ConnectionLimits {
    int max_connections = 256;    // --max-connections, 1 .. kMaxConnectionsLimit
    double read_deadline_s = 10;  // --read-deadline, kMinReadDeadline .. kMaxReadDeadline s
    size_t max_request_bytes = size_t(16) << 20;
    double keep_alive_s = 5;
    double write_timeout_s = 5;  // one send may block this long (a client that stopped reading)
    int max_per_client = 0;      // --max-connections-per-client; 0: max_connections / 2 (>= 1)
};

// The share of one client (peer address): max_per_client, or half the cap when it is 0.
int per_client_share(const ConnectionLimits& limits);
// Connections, over all clients, that may be part-way through a request head: half the cap.
int pending_heads_budget(const ConnectionLimits& limits);

constexpr int kMaxConnectionsLimit = 4096;  // each open connection holds a thread
constexpr double kMinReadDeadline = 0.1, kMaxReadDeadline = 3600;

// Throws Error naming the flag (--max-connections, --read-deadline,
// --max-connections-per-client) when a limit is out of range.
void check_connection_limits(const ConnectionLimits& limits);

class LimitedServer : public httplib::Server {
  public:
    explicit LimitedServer(const ConnectionLimits& limits);  // check_connection_limits first

    // Called for each connection refused because max_connections are open (on the accept
    // thread; keep it short).
    std::function<void()> on_refused;

    // The connection being served on this thread closes once its response is written.
    static void close_after_response();

    // Whether the client of the request being served on this thread has closed or reset its
    // connection (a peek at the socket: nothing is read); false on a thread serving none. Used
    // to stop work for a client that left before any byte of its response (a chat template's
    // render: chat/jinja_template.h's RenderCancelScope).
    static bool client_gone();

    int open_connections() const { return open_.load(); }

    // After bind: a listen backlog of max_connections (httplib's is 5, so a burst of clients
    // would wait on SYN retransmits of a second or more).
    void widen_backlog();

    // Connections closed to make room (idle ones, near the cap or past a client's share, and
    // unfinished heads past pending_heads_budget).
    long evicted() const { return evicted_.load(); }

  private:
    struct Conn {  // one open connection, in conns_ while its thread serves it
        socket_t sock = INVALID_SOCKET;
        std::string peer;
        bool idle = true;  // waiting for a request (none started)
        bool evicted = false;
        bool heading = false;  // a request head started, not yet ended
        clock_type::time_point idle_since, head_since;
    };
    using ConnIt = std::list<Conn>::iterator;

    bool process_and_close_socket(socket_t sock) override;  // httplib's hook, per connection
    void refuse(socket_t sock, const std::string& message);
    // Registers a new connection, making room as the header says; false (with the reason) when
    // the client is over its share with nothing idle to close.
    bool admit(socket_t sock, const std::string& peer, ConnIt& it, std::string& why);
    void evict(ConnIt victim);  // under conns_mu_
    static bool idle_now(const Conn& c);
    // The connection starts waiting (idle) or starts a request (its head unfinished, within
    // the pending heads' budget); false once it was evicted.
    bool set_idle(ConnIt it, bool idle);
    void head_ended(ConnIt it);
    void enforce_head_budget(ConnIt newcomer);  // under conns_mu_
    void leave(ConnIt it);

    ConnectionLimits limits_;
    std::atomic<int> open_{0};
    std::atomic<long> evicted_{0};
    std::mutex conns_mu_;
    std::list<Conn> conns_;
};

}  // namespace specula
