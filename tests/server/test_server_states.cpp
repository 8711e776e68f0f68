// HttpServer's states (server/server.h), in process over loopback HTTP: while the model loads
// every path answers llama-server's 503 "Loading model"; ready: /health 200; draining: /health
// 503 "draining", a new completion 503 with Retry-After, while the stream in flight finishes
// with [DONE]; past the drain deadline the stream in flight ends with an error event and a
// request queued for a slot is answered 503.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "server/server.h"
#include "server/serving/service.h"
#include "test_util.h"

namespace {

using namespace specula;
using json = nlohmann::json;

ServiceConfig service_config(int n_ctx) {
    ServiceConfig c;
    c.runtime.model_path = test::shared_path("models/tinystories/stories260K.gguf");
    c.runtime.n_seqs = 1;
    c.runtime.n_threads = 1;
    c.runtime.n_ctx = n_ctx;
    return c;
}

HttpConfig http_config() {
    HttpConfig h;
    h.port = 0;
    return h;
}

// A server bound and serving on its own thread; the service is not loaded yet.
struct Running {
    Service service;
    HttpServer server{service, http_config()};
    std::thread thread;

    explicit Running(int n_ctx = 512) : service(service_config(n_ctx)) {
        server.bind();
        thread = std::thread([this] { server.serve(); });
    }
    ~Running() {
        server.stop();
        thread.join();
    }
    void load() {
        service.load();
        server.set_ready();
    }
    httplib::Client client() const {
        httplib::Client c("127.0.0.1", server.port());
        c.set_read_timeout(30, 0);
        return c;
    }
};

const char* kLongStream =
    R"({"prompt": "Once", "max_tokens": 480, "n": 4, "ignore_eos": true, "stream": true})";

// Streams kLongStream on a thread of its own; `started` once the first bytes came.
struct Stream {
    std::string body;
    std::atomic<bool> started{false};
    std::thread thread;

    explicit Stream(const Running& r, const char* request = kLongStream) {
        thread = std::thread([this, &r, request] {
            httplib::Client c = r.client();
            httplib::Request req;
            req.method = "POST";
            req.path = "/v1/completions";
            req.body = request;
            req.set_header("Content-Type", "application/json");
            req.content_receiver = [this](const char* data, size_t n, uint64_t, uint64_t) {
                body.append(data, n);
                started = true;
                return true;
            };
            c.send(req);
        });
        for (int i = 0; i < 1000 && !started; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::string wait() {
        thread.join();
        return body;
    }
};

json health(const Running& r, int& status) {
    auto res = r.client().Get("/health");
    EXPECT_TRUE(res);
    if (!res) return {};
    status = res->status;
    return json::parse(res->body);
}

TEST(ServerStates, LoadingAnswers503OnEveryPathThenReady) {
    Running r;
    EXPECT_EQ(r.server.state(), ServerState::loading);
    const json loading = {
        {"error", {{"code", 503}, {"message", "Loading model"}, {"type", "unavailable_error"}}},
        {"status", "loading"}};
    int status = 0;
    EXPECT_EQ(health(r, status), loading);
    EXPECT_EQ(status, 503);
    auto c = r.client();
    for (const char* path : {"/v1/models", "/metrics", "/props"}) {
        auto res = c.Get(path);
        ASSERT_TRUE(res) << path;
        EXPECT_EQ(res->status, 503) << path;
        EXPECT_EQ(json::parse(res->body), loading) << path;
    }
    auto post =
        c.Post("/v1/completions", R"({"prompt": "Once", "max_tokens": 2})", "application/json");
    ASSERT_TRUE(post);
    EXPECT_EQ(post->status, 503);
    EXPECT_EQ(post->get_header_value("Retry-After"), "1");
    r.load();
    EXPECT_EQ(health(r, status), json({{"status", "ok"}}));
    EXPECT_EQ(status, 200);
    post = c.Post("/v1/completions", R"({"prompt": "Once", "max_tokens": 2})", "application/json");
    ASSERT_TRUE(post);
    EXPECT_EQ(post->status, 200);
}

TEST(ServerStates, DrainRefusesNewRequestsAndLetsTheStreamFinish) {
    Running r;
    r.load();
    Stream s(r);
    ASSERT_TRUE(s.started);
    int cancelled = -1;
    std::thread drain([&] { cancelled = r.server.drain(30); });
    int status = 200;
    json h;
    for (int i = 0; i < 1000 && status == 200; ++i) h = health(r, status);
    EXPECT_EQ(status, 503);
    EXPECT_EQ(h["status"], "draining");
    EXPECT_EQ(h["in_flight"], 1);
    auto post = r.client().Post("/v1/completions", R"({"prompt": "Once", "max_tokens": 2})",
                                "application/json");
    ASSERT_TRUE(post);
    EXPECT_EQ(post->status, 503);
    EXPECT_EQ(post->get_header_value("Retry-After"), "1");
    EXPECT_EQ(post->get_header_value("Connection"), "close");
    EXPECT_EQ(json::parse(post->body)["error"]["code"], 503);
    // Other routes still answer (monitoring).
    auto metrics = r.client().Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->status, 200);
    EXPECT_NE(metrics->body.find("vllm:request_queue_time_seconds_count"), std::string::npos);
    const std::string body = s.wait();
    drain.join();
    EXPECT_EQ(cancelled, 0);
    EXPECT_NE(body.find("data: [DONE]"), std::string::npos);
    EXPECT_EQ(body.find("\"error\""), std::string::npos);
    EXPECT_EQ(r.server.in_flight(), 0);
}

// The stream holds the one slot; a second request waits for it in the queue. Past the deadline
// the stream ends with an error event, and the queued one, which has sent nothing, is answered
// 503 with Retry-After (a balancer retries it elsewhere).
TEST(ServerStates, PastTheDrainDeadlineTheStreamEndsWithAnErrorEvent) {
    Running r(8192);
    r.load();
    // One choice (between choices the queued request could take the slot), longer than the wait.
    Stream s(r, R"({"prompt": "Once", "max_tokens": 8000, "ignore_eos": true, "stream": true})");
    ASSERT_TRUE(s.started);
    int queued_status = 0;
    std::string queued_body, queued_retry;
    std::thread second([&] {
        auto res = r.client().Post("/v1/completions", R"({"prompt": "Once", "max_tokens": 8})",
                                   "application/json");
        if (!res) return;
        queued_status = res->status;
        queued_body = res->body;
        queued_retry = res->get_header_value("Retry-After");
    });
    for (int i = 0; i < 400 && r.server.in_flight() < 2; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_EQ(r.server.in_flight(), 2);
    const auto t0 = std::chrono::steady_clock::now();
    const int cancelled = r.server.drain(0.05);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
    const std::string body = s.wait();
    second.join();
    EXPECT_EQ(cancelled, 2);
    EXPECT_EQ(body.find("data: [DONE]"), std::string::npos) << body.substr(body.size() - 300);
    EXPECT_NE(body.find("drain deadline"), std::string::npos) << body.substr(body.size() - 300);
    EXPECT_EQ(queued_status, 503) << queued_body;
    EXPECT_EQ(queued_retry, "1");
    EXPECT_NE(queued_body.find("drain deadline"), std::string::npos) << queued_body;
}

}  // namespace
