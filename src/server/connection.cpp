// LimitedServer: see connection.h. httplib hands each accepted socket to a TaskQueue and then to
// the virtual process_and_close_socket(); both are replaced here: the queue runs each connection
// on its own thread up to the cap (and runs a refusal inline beyond it), and the connection loop
// reads through a Stream whose reads share one deadline per request.
#include "server/connection.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/error.h"

namespace specula {

namespace {

thread_local bool t_refuse = false;             // the connection handed over now is over the cap
thread_local bool t_close_after = false;        // close the current connection after its response
thread_local socket_t t_sock = INVALID_SOCKET;  // the connection this thread serves

int ms_until(clock_type::time_point t) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - clock_type::now());
    return ms.count() < 0 ? 0 : int(std::min<long long>(ms.count(), 1 << 30));
}

// poll() for one event, retried on EINTR; true when the socket is ready before `timeout_ms`.
bool wait_for(socket_t sock, short events, int timeout_ms) {
    pollfd p{sock, events, 0};
    for (;;) {
        const int r = ::poll(&p, 1, timeout_ms);
        if (r < 0 && errno == EINTR) continue;
        return r > 0;
    }
}

// One thread per open connection, created when every existing one is busy, at most `max`.
class ConnectionQueue final : public httplib::TaskQueue {
  public:
    explicit ConnectionQueue(int max) : max_(max) {}
    ~ConnectionQueue() override { shutdown(); }

    void enqueue(std::function<void()> fn) override {
        std::unique_lock<std::mutex> lk(mu_);
        if (busy_ >= max_ || stopping_ || !ensure_thread(busy_ + 1)) {
            lk.unlock();
            t_refuse = true;  // process_and_close_socket answers 503 and closes, on this thread
            fn();
            t_refuse = false;
            return;
        }
        ++busy_;
        jobs_.push_back(std::move(fn));
        lk.unlock();
        cv_.notify_one();
    }

    void shutdown() override {
        {
            std::lock_guard<std::mutex> lk(mu_);
            stopping_ = true;
        }
        cv_.notify_all();
        for (auto& t : threads_)
            if (t.joinable()) t.join();
        threads_.clear();
    }

  private:
    // Enough threads for `busy` jobs (under mu_): a thread that is not running a job is idle or
    // about to be (it has counted its job done), so a new one starts only when there are fewer
    // threads than jobs; the pool grows to the peak of open connections and no further.
    // False if a thread was needed and could not start.
    bool ensure_thread(int busy) {
        if (int(threads_.size()) >= busy) return true;
        try {
            threads_.emplace_back([this] { work(); });
            return true;
        } catch (const std::exception&) {
            return false;
        }
    }

    void work() {
        std::unique_lock<std::mutex> lk(mu_);
        for (;;) {
            cv_.wait(lk, [&] { return stopping_ || !jobs_.empty(); });
            if (jobs_.empty()) return;  // stopping, nothing left
            auto fn = std::move(jobs_.front());
            jobs_.pop_front();
            lk.unlock();
            fn();
            lk.lock();
            --busy_;
        }
    }

    const int max_;
    int busy_ = 0;  // connections queued or being served
    bool stopping_ = false;
    std::deque<std::function<void()>> jobs_;
    std::vector<std::thread> threads_;
    std::mutex mu_;
    std::condition_variable cv_;
};

// A buffered socket stream whose reads all end by the deadline of the current request and
// together take at most `max_bytes` from the socket (the head, any chunk framing and the body).
class DeadlineStream final : public httplib::Stream {
  public:
    DeadlineStream(socket_t sock, size_t max_bytes, int write_timeout_ms)
        : sock_(sock), max_bytes_(max_bytes), write_timeout_ms_(write_timeout_ms) {}

    // The next request starts: its deadline, and a fresh byte budget; `on_head_end` is called
    // once the bytes handed out so far hold its whole head (up to the blank line).
    void start_request(clock_type::time_point deadline, std::function<void()> on_head_end) {
        deadline_ = deadline;
        bytes_ = 0;
        cut_off_ = false;
        on_head_end_ = std::move(on_head_end);
        line_len_ = 0;
        lines_ = 0;
    }
    // The request ran past its deadline or byte budget: the connection must close, since what
    // it sends next is the unread rest of that request, not a new one.
    bool cut_off() const { return cut_off_; }

    bool has_buffered() const { return buf_pos_ < buf_len_; }

    bool is_readable() const override {
        if (buf_pos_ < buf_len_) return true;
        // Past the deadline nothing more is read, however steadily bytes still arrive.
        if (clock_type::now() < deadline_ && wait_for(sock_, POLLIN, ms_until(deadline_)))
            return true;
        cut_off_ = true;  // the only way to get here is the deadline
        return false;
    }

    // Writable, and the peer has not closed its end (a pending EOF means it is gone).
    bool is_writable() const override {
        if (!wait_for(sock_, POLLOUT, write_timeout_ms_)) return false;
        if (!wait_for(sock_, POLLIN, 0)) return true;
        char c;
        const ssize_t n = ::recv(sock_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
    }

    ssize_t read(char* ptr, size_t size) override {
        if (buf_pos_ == buf_len_) {
            if (bytes_ >= max_bytes_) cut_off_ = true;
            if (cut_off_ || !is_readable()) return -1;
            const size_t want =
                std::min(size >= sizeof buf_ ? size : sizeof buf_, max_bytes_ - bytes_);
            const ssize_t n = recv_some(size >= sizeof buf_ ? ptr : buf_, want);
            if (n > 0) bytes_ += size_t(n);
            if (n > 0 && size >= sizeof buf_) scan_head(ptr, size_t(n));
            if (n <= 0 || size >= sizeof buf_) return n;
            buf_pos_ = 0;
            buf_len_ = size_t(n);
        }
        const size_t n = std::min(size, buf_len_ - buf_pos_);
        std::memcpy(ptr, buf_ + buf_pos_, n);
        buf_pos_ += n;
        scan_head(ptr, n);
        return ssize_t(n);
    }

    ssize_t write(const char* ptr, size_t size) override {
        if (!is_writable()) return -1;
        for (;;) {
            const ssize_t n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            return n;
        }
    }

    void get_remote_ip_and_port(std::string& ip, int& port) const override {
        address(&getpeername, ip, port);
    }
    void get_local_ip_and_port(std::string& ip, int& port) const override {
        address(&getsockname, ip, port);
    }
    socket_t socket() const override { return sock_; }

  private:
    // Watches the bytes handed out for the head's end: an empty line (CRLF or LF) after at least
    // one line. Called for every read; a no-op once the head has ended.
    void scan_head(const char* p, size_t n) {
        for (size_t i = 0; i < n && on_head_end_; ++i) {
            if (p[i] == '\r') continue;
            if (p[i] != '\n') {
                ++line_len_;
                continue;
            }
            if (line_len_ == 0 && lines_ > 0) {
                auto done = std::move(on_head_end_);
                on_head_end_ = nullptr;
                done();
                return;
            }
            ++lines_;
            line_len_ = 0;
        }
    }

    ssize_t recv_some(char* p, size_t n) {
        for (;;) {
            const ssize_t r = ::recv(sock_, p, n, 0);
            if (r < 0 && errno == EINTR) continue;
            return r;
        }
    }

    void address(int (*name)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
        sockaddr_storage addr{};
        socklen_t len = sizeof addr;
        ip.clear();
        port = 0;
        if (name(sock_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
        char host[NI_MAXHOST], serv[NI_MAXSERV];
        if (getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, serv,
                        sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
            ip = host;
            port = std::atoi(serv);
        }
    }

    socket_t sock_;
    clock_type::time_point deadline_;
    size_t max_bytes_, bytes_ = 0;
    mutable bool cut_off_ = false;
    int write_timeout_ms_;
    std::function<void()> on_head_end_;  // set while the request's head has not ended
    size_t line_len_ = 0, lines_ = 0;
    char buf_[4096];
    size_t buf_pos_ = 0, buf_len_ = 0;
};

int to_ms(double s) {
    return s <= 0 ? 0 : int(std::min(s * 1e3, double(1 << 30)));
}

}  // namespace

int per_client_share(const ConnectionLimits& limits) {
    return limits.max_per_client > 0 ? limits.max_per_client
                                     : std::max(1, limits.max_connections / 2);
}

int pending_heads_budget(const ConnectionLimits& limits) {
    return std::max(1, limits.max_connections / 2);
}

void check_connection_limits(const ConnectionLimits& limits) {
    if (limits.max_connections < 1 || limits.max_connections > kMaxConnectionsLimit)
        fail("--max-connections must be in [1, ", kMaxConnectionsLimit, "], got ",
             limits.max_connections);
    // Written so that NaN fails too.
    if (!(limits.read_deadline_s >= kMinReadDeadline && limits.read_deadline_s <= kMaxReadDeadline))
        fail("--read-deadline must be in [", kMinReadDeadline, ", ", kMaxReadDeadline,
             "] seconds, got ", limits.read_deadline_s);
    if (limits.max_per_client < 0 || limits.max_per_client > limits.max_connections)
        fail("--max-connections-per-client must be in [1, --max-connections = ",
             limits.max_connections, "] (0: half of it), got ", limits.max_per_client);
}

LimitedServer::LimitedServer(const ConnectionLimits& limits) : limits_(limits) {
    check_connection_limits(limits);
    // The cap on live connections is admit()'s; the pool has room beyond it for the threads of
    // evicted connections still on their way out, so that a closed idle socket frees its place
    // at once, not when its thread gets round to leaving.
    const int threads = limits.max_connections + std::max(2, limits.max_connections / 8);
    new_task_queue = [threads] { return new ConnectionQueue(threads); };
}

void LimitedServer::widen_backlog() {
    const socket_t s = svr_sock_;
    if (s != INVALID_SOCKET) ::listen(s, std::max(limits_.max_connections, 16));
}

void LimitedServer::close_after_response() {
    t_close_after = true;
}

bool LimitedServer::client_gone() {
    if (t_sock == INVALID_SOCKET) return false;
    pollfd p{t_sock, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLERR | POLLHUP | POLLRDHUP)) return true;
    char c;
    const ssize_t r = ::recv(t_sock, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

void LimitedServer::refuse(socket_t sock, const std::string& message) {
    const std::string body = R"({"error":{"message":")" + message +
                             R"(","type":"server_error","param":null,"code":null}})";
    const std::string reply =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        "Connection: close\r\nRetry-After: 1\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    (void)!::send(sock, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (on_refused) on_refused();
}

void LimitedServer::evict(ConnIt victim) {
    victim->evicted = true;
    victim->idle = false;                 // never picked twice
    ::shutdown(victim->sock, SHUT_RDWR);  // its thread wakes from poll() and closes it
    ++evicted_;
}

// Idle, and no request has arrived on it since (its thread may not have woken for it yet).
bool LimitedServer::idle_now(const Conn& c) {
    return c.idle && !c.evicted && !wait_for(c.sock, POLLIN, 0);
}

bool LimitedServer::admit(socket_t sock, const std::string& peer, ConnIt& it, std::string& why) {
    std::lock_guard<std::mutex> lk(conns_mu_);
    const int share = per_client_share(limits_);
    int mine = 0, live = 0;
    for (const Conn& c : conns_) {
        mine += c.peer == peer && !c.evicted;
        live += !c.evicted;
    }
    if (mine >= share) {
        ConnIt my_idle = conns_.end();  // (polled only now: a client at its share is rare)
        for (ConnIt c = conns_.begin(); c != conns_.end(); ++c) {
            if (c->peer == peer && idle_now(*c) &&
                (my_idle == conns_.end() || c->idle_since < my_idle->idle_since))
                my_idle = c;
        }
        if (my_idle == conns_.end()) {
            why = "too many open connections from " + peer + " (its share is " +
                  std::to_string(share) + " of " + std::to_string(limits_.max_connections) +
                  ", none idle), try again later";
            return false;
        }
        evict(my_idle);
    } else if (live + 1 > limits_.max_connections - limits_.max_connections / 8) {
        // Near the cap: close the longest-idle connection of the client holding the most.
        std::unordered_map<std::string, int> per_peer;
        for (const Conn& c : conns_)
            if (!c.evicted) ++per_peer[c.peer];
        ConnIt victim = conns_.end();
        for (ConnIt c = conns_.begin(); c != conns_.end(); ++c) {
            if (!idle_now(*c)) continue;
            if (victim == conns_.end() || per_peer[c->peer] > per_peer[victim->peer] ||
                (per_peer[c->peer] == per_peer[victim->peer] && c->idle_since < victim->idle_since))
                victim = c;
        }
        if (victim != conns_.end()) {
            evict(victim);
        } else if (live + 1 > limits_.max_connections) {
            why = "too many open connections, try again later";
            return false;
        }
    }
    Conn c;
    c.sock = sock;
    c.peer = peer;
    c.idle_since = clock_type::now();
    it = conns_.insert(conns_.end(), c);
    return true;
}

bool LimitedServer::set_idle(ConnIt it, bool idle) {
    std::lock_guard<std::mutex> lk(conns_mu_);
    if (it->evicted) return false;
    it->idle = idle;
    it->heading = !idle;
    if (idle) it->idle_since = clock_type::now();
    if (!idle) {
        it->head_since = clock_type::now();
        enforce_head_budget(it);
    }
    return true;
}

void LimitedServer::head_ended(ConnIt it) {
    std::lock_guard<std::mutex> lk(conns_mu_);
    it->heading = false;
}

// Past the budget of unfinished heads, the oldest unfinished head of the client holding the
// most is closed (never the newcomer's: it has just begun, and a head sent whole ends at once).
void LimitedServer::enforce_head_budget(ConnIt newcomer) {
    std::unordered_map<std::string, int> per_peer;
    int heading = 0;
    for (const Conn& c : conns_) {
        if (!c.heading || c.evicted) continue;
        ++per_peer[c.peer];
        ++heading;
    }
    if (heading <= pending_heads_budget(limits_)) return;
    ConnIt victim = conns_.end();
    for (ConnIt c = conns_.begin(); c != conns_.end(); ++c) {
        if (!c->heading || c->evicted || c == newcomer) continue;
        if (victim == conns_.end() || per_peer[c->peer] > per_peer[victim->peer] ||
            (per_peer[c->peer] == per_peer[victim->peer] && c->head_since < victim->head_since))
            victim = c;
    }
    if (victim != conns_.end()) evict(victim);
}

void LimitedServer::leave(ConnIt it) {
    std::lock_guard<std::mutex> lk(conns_mu_);  // before close(): evict() never sees a reused fd
    conns_.erase(it);
}

bool LimitedServer::process_and_close_socket(socket_t sock) {
    if (t_refuse) {
        refuse(sock, "too many open connections, try again later");
        ::shutdown(sock, SHUT_RDWR);
        ::close(sock);
        return false;
    }
    std::string peer;
    int peer_port = 0;
    DeadlineStream strm(sock, limits_.max_request_bytes, to_ms(limits_.write_timeout_s));
    strm.get_remote_ip_and_port(peer, peer_port);
    ConnIt me;
    std::string why;
    if (!admit(sock, peer, me, why)) {
        refuse(sock, why);
        ::shutdown(sock, SHUT_RDWR);
        ::close(sock);
        return false;
    }
    ++open_;
    const int keep_alive_ms = to_ms(limits_.keep_alive_s);
    bool ok = false;
    for (size_t count = keep_alive_max_count_; count > 0; --count) {
        // Wait for the next request (or the server to stop), then give it the whole deadline.
        bool ready = false;
        if (!set_idle(me, true)) break;
        for (auto idle_end = clock_type::now() + std::chrono::milliseconds(keep_alive_ms);
             svr_sock_ != INVALID_SOCKET && !ready && clock_type::now() < idle_end;) {
            ready =
                strm.has_buffered() || wait_for(sock, POLLIN, std::min(100, ms_until(idle_end)));
        }
        if (!ready || svr_sock_ == INVALID_SOCKET || !set_idle(me, false)) break;
        strm.start_request(
            clock_type::now() + std::chrono::milliseconds(to_ms(limits_.read_deadline_s)),
            [this, me] { head_ended(me); });
        t_close_after = false;
        bool closed = false;
        t_sock = sock;
        ok = process_request(strm, count == 1 || t_close_after, closed, nullptr);
        if (!ok || closed || t_close_after || strm.cut_off()) break;
    }
    t_close_after = false;
    t_sock = INVALID_SOCKET;
    leave(me);
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    --open_;
    return ok;
}

}  // namespace specula
