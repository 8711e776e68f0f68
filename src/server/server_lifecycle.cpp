// HttpServer's lifecycle (see server.h): bind, serve, ready, drain, stop.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "common/clock.h"
#include "common/error.h"
#include "server/host_check.h"
#include "server/server.h"

namespace specula {

void HttpServer::bind() {
    if (cfg_.port == 0) {
        const int port = svr_->bind_to_any_port(cfg_.host);
        if (port < 0) fail("cannot bind ", cfg_.host, " to any port");
        cfg_.port = port;
    } else if (!svr_->bind_to_port(cfg_.host, cfg_.port)) {
        fail("cannot listen on ", cfg_.host, ":", cfg_.port, " (in use, or not a local address?)");
    }
    svr_->widen_backlog();
    std::fprintf(stderr,
                 "serve: bound %s:%d; loading the model (every request is answered 503 until it "
                 "is ready)\n",
                 cfg_.host.c_str(), cfg_.port);
    std::fflush(stderr);
}

void HttpServer::serve() {
    if (!stop_requested_.load()) svr_->listen_after_bind();  // else: stopped before it started
    serve_ended_.store(true);
}

void HttpServer::set_ready() {
    state_.store(ServerState::ready, std::memory_order_release);
    std::fprintf(stderr, "serve: listening on http://%s:%d\n", cfg_.host.c_str(), cfg_.port);
    if (cfg_.api_key.empty() && !is_loopback_host(cfg_.host)) {
        std::fprintf(stderr,
                     "serve: warning: %s is reachable from other machines and no --api-key is "
                     "set: anyone who can connect can run generations and read /metrics\n",
                     cfg_.host.c_str());
    }
    std::fflush(stderr);
}

// True once no completion is in flight; false at the timeout or when hurried.
bool HttpServer::wait_idle(double timeout_s) {
    const auto end = clock_type::now() + std::chrono::duration<double>(std::max(timeout_s, 0.0));
    while (in_flight_.load() > 0) {
        if (clock_type::now() >= end || hurry_.load()) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

int HttpServer::drain(double timeout_s) {
    begin_drain();
    std::fprintf(stderr,
                 "serve: draining: no new requests; %d in flight, waiting up to %g s for them\n",
                 in_flight(), timeout_s);
    std::fflush(stderr);
    int cancelled = 0;
    if (!wait_idle(timeout_s)) {
        cancelled = in_flight();
        std::fprintf(stderr, "serve: drain %s: cancelling %d requests still in flight\n",
                     hurry_.load() ? "cut short (second signal)" : "deadline", cancelled);
        service_.cancel_all();
        if (!wait_idle(5.0))
            std::fprintf(stderr, "serve: %d requests did not end 5 s after their cancellation\n",
                         in_flight());
    }
    std::fprintf(stderr, "serve: drained, stopping\n");
    stop();
    return cancelled;
}

void HttpServer::stop() {
    // httplib's stop() does nothing until its accept loop runs: a stop that comes before serve()
    // gets there is seen by serve() itself, or waits (a moment) for the loop to start.
    stop_requested_.store(true);
    for (int i = 0; i < 500 && !svr_->is_running() && !serve_ended_.load(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    svr_->stop();
}

}  // namespace specula
