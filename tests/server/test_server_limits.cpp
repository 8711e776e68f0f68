// `specula serve` against hostile and careless clients (issue #15): the real binary on a free
// loopback port. The body limit holds after chunked and gzip decoding; slow-dripping connections
// neither starve /health nor outlive the request-read deadline; connections over the cap get 503
// at once; JSON sent as text/plain, a foreign Host header, wrong methods, out-of-range token ids,
// max_tokens that would overflow the context check and the model file's path as `model` are all
// refused; --host 0.0.0.0 without --api-key warns; --max-body-bytes -1 is refused.
// --max-connections and --read-deadline set the cap and the deadline and are range-checked
// before any model loads; a prompt too long for the context by its bytes alone (tens of MB under
// a raised body limit) is refused with 400 before it is tokenized. Request heads dripped from
// many client addresses hold at most the budget of unfinished heads (issue #45).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "server/raw_conn.h"
#include "server/server.h"
#include "server/server_process.h"
#include "test_util.h"

namespace {

using json = nlohmann::json;
using specula::test::RawConn;
using specula::test::ServerProcess;
using specula::test::shared_path;
using clock_type = std::chrono::steady_clock;

std::string target_path() {
    return shared_path("models/tinystories/stories260K.gguf");
}

double seconds_since(clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

int status_of(const std::string& response) {
    if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return 0;
    return std::stoi(response.substr(9, 3));
}

class ServerLimits : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        server_ = std::make_unique<ServerProcess>(
            std::vector<std::string>{"-m", target_path(), "-c", "256", "-t", "2",
                                     "--max-body-bytes", "65536"},
            "limits");
    }
    static void TearDownTestSuite() { server_.reset(); }
    static std::unique_ptr<ServerProcess> server_;
    const ServerProcess& s() { return *server_; }

    // Waits (up to 10 s) until a fresh connection is served, not refused: the connections of an
    // earlier test are closed and their slots free again.
    void wait_until_served() {
        const auto t0 = clock_type::now();
        while (seconds_since(t0) < 10) {
            if (status_of(raw("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: "
                              "close\r\n\r\n")) == 200)
                return;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        FAIL() << "the server refused or ignored /health for 10 s";
    }

    // A raw request's full response (the server closes, or answers within 30 s).
    std::string raw(const std::string& request) {
        RawConn c(s().port());
        EXPECT_TRUE(c.send_all(request));
        return c.read_until_close(30);
    }
    void expect_error(const httplib::Result& res, int status, const std::string& what) {
        ASSERT_TRUE(res) << "no response, expected " << status;
        EXPECT_EQ(res->status, status) << res->body;
        const json j = json::parse(res->body, nullptr, false);
        ASSERT_TRUE(j.contains("error")) << res->body;
        EXPECT_NE(j["error"]["message"].get<std::string>().find(what), std::string::npos)
            << res->body;
    }
};
std::unique_ptr<ServerProcess> ServerLimits::server_;

std::string big_prompt_body(size_t n) {
    return json{{"prompt", std::string(n, 'a')}, {"max_tokens", 1}}.dump();
}

TEST_F(ServerLimits, ChunkedBodyOverTheLimitIs413AndClosed) {
    const std::string body = big_prompt_body(200000);
    std::string req =
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n";
    for (size_t off = 0; off < body.size(); off += 8192) {
        const std::string part = body.substr(off, 8192);
        char hex[16];
        std::snprintf(hex, sizeof hex, "%zx", part.size());
        req += std::string(hex) + "\r\n" + part + "\r\n";
    }
    req += "0\r\n\r\n";
    RawConn c(s().port());
    c.send_all(req);  // the server may close before all of it is sent
    const std::string res = c.read_until_close(30);
    EXPECT_EQ(status_of(res), 413) << res.substr(0, 300);
    EXPECT_NE(res.find("larger than the limit of 65536 bytes"), std::string::npos) << res;
    EXPECT_TRUE(c.closed_by_server()) << "the unread rest of the body must not stay queued";
    // A small chunked body is fine.
    const std::string small = R"({"prompt": "Lily", "max_tokens": 2, "temperature": 0})";
    char hex[16];
    std::snprintf(hex, sizeof hex, "%zx", small.size());
    const std::string ok =
        raw("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
            std::string(hex) + "\r\n" + small + "\r\n0\r\n\r\n");
    EXPECT_EQ(status_of(ok), 200) << ok;
}

TEST_F(ServerLimits, GzipBodyThatExpandsPastTheLimitIs413) {
    auto c = s().client();
    c.set_compress(true);  // Content-Encoding: gzip; 1 MB of 'a' compresses to ~1 KB
    auto res = c.Post("/v1/completions", big_prompt_body(1 << 20), "application/json");
    expect_error(res, 413, "larger than the limit of 65536 bytes");
    auto ok =
        c.Post("/v1/completions", R"({"prompt": "Lily", "max_tokens": 2})", "application/json");
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST_F(ServerLimits, ContentLengthOverTheLimitIs413) {
    auto res = s().client().Post("/v1/completions", big_prompt_body(100000), "application/json");
    expect_error(res, 413, "larger than the limit");
}

// 80 connections dripping a header byte every 250 ms (more than a fixed pool of HTTP threads
// would hold) must not delay /health, and each is closed by the request-read deadline (10 s)
// however steadily it drips.
TEST_F(ServerLimits, SlowLorisNeitherStarvesOthersNorOutlivesTheDeadline) {
    std::vector<std::unique_ptr<RawConn>> conns;
    for (int i = 0; i < 80; ++i) {
        conns.push_back(std::make_unique<RawConn>(s().port()));
        conns.back()->send_all("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    }
    const auto t0 = clock_type::now();
    bool all_closed = false;
    double first_close = -1, health_max = 0;
    int round = 0;
    while (seconds_since(t0) < 16 && !all_closed) {
        all_closed = true;
        for (auto& c : conns) {
            if (c->closed_by_server()) {
                if (first_close < 0) first_close = seconds_since(t0);
                continue;
            }
            all_closed = false;
            c->send_all("X");  // one more byte of a header that never ends
        }
        if (round++ % 4 == 0 && !all_closed) {
            const auto h0 = clock_type::now();
            auto res = s().client(5).Get("/health");
            EXPECT_TRUE(res && res->status == 200) << "at " << seconds_since(t0) << " s";
            health_max = std::max(health_max, seconds_since(h0));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    EXPECT_TRUE(all_closed) << "dripping connections still open after 16 s";
    EXPECT_GE(first_close, 8.0) << "closed before the 10 s deadline: not the deadline";
    EXPECT_LT(health_max, 2.0) << "/health was delayed by the dripping connections";
}

// A request whose head is whole and whose body has not all arrived: held open until the read
// deadline (not by the budget of unfinished heads, which would close some of them).
const char* kBodyUnfinished =
    "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    "Content-Length: 100\r\n\r\n{";

// Past --max-connections (256) a connection is answered 503 at once and closed, not queued.
// The held ones come from two client addresses (each holds at most half the cap) and are
// mid-request, so none is idle to be closed for the newcomer.
TEST_F(ServerLimits, ConnectionsOverTheCapGet503AtOnce) {
    std::vector<std::unique_ptr<RawConn>> held;
    for (int i = 0; i < 256; ++i) {
        held.push_back(std::make_unique<RawConn>(s().port(), i % 2 ? "127.0.0.1" : "127.0.0.2"));
        held.back()->send_all(kBodyUnfinished);  // body unfinished: held open
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto t0 = clock_type::now();
    RawConn extra(s().port(), "127.0.0.3");
    const std::string res = extra.read_until_close(5);
    EXPECT_EQ(status_of(res), 503) << res;
    EXPECT_NE(res.find("too many open connections"), std::string::npos) << res;
    EXPECT_LT(seconds_since(t0), 2.0);
    held.clear();  // once they go, the server answers again
    bool ok = false;
    for (int i = 0; i < 50 && !ok; ++i) {
        auto h = s().client(5).Get("/health");
        ok = h && h->status == 200;
        if (!ok) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_TRUE(ok);
}

TEST_F(ServerLimits, JsonSentAsTextPlainIs415) {
    const std::string body = R"({"prompt": "Lily", "max_tokens": 2})";
    expect_error(s().client().Post("/v1/completions", body, "text/plain"), 415,
                 "Content-Type: application/json");
    expect_error(s().client().Post("/v1/chat/completions",
                                   R"({"messages": [{"role": "user", "content": "hi"}]})",
                                   "application/x-www-form-urlencoded"),
                 415, "application/json");
    auto ok = s().client().Post("/v1/completions", body, "Application/JSON; charset=utf-8");
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST_F(ServerLimits, ForeignHostHeaderIs403WithoutAnApiKey) {
    const std::string port = std::to_string(s().port());
    for (const std::string& host :
         std::vector<std::string>{"evil.example:" + port, "attacker.com", "127.0.0.1.evil.com"}) {
        const std::string res =
            raw("GET /v1/models HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n");
        EXPECT_EQ(status_of(res), 403) << host << ": " << res;
        EXPECT_NE(res.find("host_not_allowed"), std::string::npos) << res;
    }
    for (const std::string& host :
         {"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port, std::string("10.1.2.3")}) {
        const std::string res =
            raw("GET /v1/models HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n");
        EXPECT_EQ(status_of(res), 200) << host << ": " << res;
    }
}

TEST(ServerHostCheck, WhatTheHostHeaderMayName) {
    using specula::host_header_allowed;
    EXPECT_TRUE(host_header_allowed("", "127.0.0.1"));
    EXPECT_TRUE(host_header_allowed("192.168.1.5:8080", "0.0.0.0"));
    EXPECT_TRUE(host_header_allowed("LOCALHOST", "127.0.0.1"));
    EXPECT_TRUE(host_header_allowed("app.localhost:80", "127.0.0.1"));
    EXPECT_TRUE(host_header_allowed("myhost.lan:8080", "myhost.lan"));
    EXPECT_FALSE(host_header_allowed("myhost.lan:8080", "0.0.0.0"));
    EXPECT_FALSE(host_header_allowed("[::1", "127.0.0.1"));
    EXPECT_FALSE(host_header_allowed("[zz]:80", "127.0.0.1"));
    EXPECT_FALSE(host_header_allowed("localhost.evil.com", "127.0.0.1"));
    EXPECT_TRUE(specula::is_loopback_host("127.0.0.2"));
    EXPECT_TRUE(specula::is_loopback_host("::1"));
    EXPECT_FALSE(specula::is_loopback_host("0.0.0.0"));
}

TEST_F(ServerLimits, WrongMethodOnAKnownPathIs405) {
    auto get = s().client().Get("/v1/completions");
    expect_error(get, 405, "method not allowed");
    EXPECT_EQ(get->get_header_value("Allow"), "POST");
    auto post = s().client().Post("/health", "{}", "application/json");
    expect_error(post, 405, "method not allowed");
    EXPECT_EQ(post->get_header_value("Allow"), "GET, HEAD");
    expect_error(s().client().Delete("/v1/models"), 405, "method not allowed");
    expect_error(s().client().Get("/no/such/path"), 404, "not found");
}

TEST_F(ServerLimits, TokenIdsAreRangeCheckedNotNarrowed) {
    for (const std::string ids : {"[1, 4294967301]", "[1, -4294967291]", "[18446744073709551615]",
                                  "[2147483648]", "[1, 512]"}) {
        expect_error(
            s().client().Post("/v1/completions", R"({"max_tokens": 1, "prompt": )" + ids + "}",
                              "application/json"),
            400, "prompt token id");
    }
    auto ok = s().client().Post("/v1/completions", R"({"prompt": [1, 5], "max_tokens": 1})",
                                "application/json");
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST_F(ServerLimits, MaxTokensThatWouldOverflowTheContextCheckIs400) {
    for (const std::string field : {"max_tokens", "max_completion_tokens"}) {
        expect_error(s().client().Post("/v1/completions",
                                       R"({"prompt": "Lily", ")" + field + R"(": 2147483647})",
                                       "application/json"),
                     400, "exceeds the context");
    }
}

// A seed over 2^63 - 1 is its own seed, not clamped to 2^63 - 1.
TEST_F(ServerLimits, SeedsAboveTwoToThe63AreNotClamped) {
    std::vector<std::string> texts;
    for (const std::string seed :
         {"18446744073709551615", "9223372036854775807", "18446744073709551615"}) {
        auto res = s().client().Post(
            "/v1/completions",
            R"({"prompt": "Lily", "max_tokens": 32, "temperature": 1, "seed": )" + seed + "}",
            "application/json");
        ASSERT_TRUE(res);
        ASSERT_EQ(res->status, 200) << res->body;
        texts.push_back(json::parse(res->body)["choices"][0]["text"].get<std::string>());
    }
    EXPECT_EQ(texts[0], texts[2]) << "the same seed must give the same text";
    EXPECT_NE(texts[0], texts[1]) << "2^64 - 1 was run as 2^63 - 1";
}

// Any model name is served by the one model (as llama-server does); the reply names the served
// name, never the file's path.
TEST_F(ServerLimits, TheModelFilesPathIsServedButNeverEchoed) {
    const json body = {{"prompt", "Lily"}, {"max_tokens", 1}, {"model", target_path()}};
    auto res = s().client().Post("/v1/completions", body.dump(), "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(res->body.find(target_path()), std::string::npos) << res->body;
}

// A server with its connection limits and body limit set by flag.
class ServerFlags : public ServerLimits {
  protected:
    static void SetUpTestSuite() {
        server_ = std::make_unique<ServerProcess>(
            std::vector<std::string>{"-m", target_path(), "-c", "256", "-t", "2",
                                     "--max-connections", "8", "--read-deadline", "5",
                                     "--max-body-bytes", std::to_string(64 << 20)},
            "flags");
    }
};

TEST_F(ServerFlags, MaxConnectionsSetsTheCap) {
    wait_until_served();
    std::vector<std::unique_ptr<RawConn>> held;
    for (int i = 0; i < 8; ++i) {  // two clients, each with its share (half the cap)
        held.push_back(std::make_unique<RawConn>(s().port(), i % 2 ? "127.0.0.1" : "127.0.0.2"));
        held.back()->send_all(kBodyUnfinished);
    }
    // Time for the server to accept all eight (slow under ASan on a loaded machine); the held
    // ones reach their 5 s deadline only after the extra ones' answers (1 + 3 x 1 s).
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    for (size_t i = 0; i < held.size(); ++i)
        ASSERT_FALSE(held[i]->closed_by_server()) << "held connection " << i << " was refused";
    // A ninth connection is refused. (Rarely, on a busy machine, one sat unanswered for seconds:
    // up to three tries of 1 s each, all inside the held ones' deadline.)
    std::string res;
    for (int attempt = 0; attempt < 3 && status_of(res) != 503; ++attempt) {
        RawConn extra(s().port(), "127.0.0.3");
        res = extra.read_until_close(1.0);
    }
    EXPECT_EQ(status_of(res), 503) << res;
    EXPECT_NE(res.find("too many open connections"), std::string::npos) << res;
}

// A server with room for 32 connections, of which 16 may be part-way through a request head.
class ServerSlowHeads : public ServerLimits {
  protected:
    static void SetUpTestSuite() {
        server_ = std::make_unique<ServerProcess>(
            std::vector<std::string>{"-m", target_path(), "-c", "256", "-t", "1",
                                     "--max-connections", "32"},
            "slow-heads");
    }
};

// 96 sockets (3x the cap) from 8 client addresses, 127.0.0.2 ... 127.0.0.9 (12 each, under each
// one's share), each sending a request head one byte every 50 ms and reopened when the server
// closes it: they hold at most the budget of unfinished heads (half the cap), and every one of
// another client's 20 requests is answered. (Without the budget the dripping heads fill the cap
// and the other client's requests all get 503: 0 of 20 answered.)
TEST_F(ServerSlowHeads, HeadsDrippedFromManyAddressesLeaveRoomForOthers) {
    wait_until_served();
    const int port = s().port();
    std::atomic<bool> stop{false};
    std::atomic<int> opened{0};
    std::thread attack([&] {
        const std::string head = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
        std::vector<std::unique_ptr<RawConn>> conns(96);
        std::vector<size_t> sent(conns.size(), 0);
        const std::vector<std::string> from = {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5",
                                               "127.0.0.6", "127.0.0.7", "127.0.0.8", "127.0.0.9"};
        while (!stop) {
            for (size_t i = 0; i < conns.size() && !stop; ++i) {
                if (conns[i] && conns[i]->closed_by_server()) conns[i].reset();
                if (!conns[i]) {
                    try {
                        conns[i] = std::make_unique<RawConn>(port, from[i % from.size()].c_str());
                    } catch (const std::exception&) {
                        continue;
                    }
                    sent[i] = 0;
                    ++opened;
                }
                const char c = sent[i] < head.size() ? head[sent[i]] : 'x';
                conns[i]->send_all(std::string(1, c));  // one more byte of an endless head
                ++sent[i];
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    int answered = 0;
    std::string failure;
    for (int k = 0; k < 20; ++k) {
        RawConn c(port, "127.0.0.1");
        c.send_all("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        const std::string res = c.read_until_close(5);
        if (status_of(res) == 200)
            ++answered;
        else
            failure = res.empty() ? "(no answer)" : res;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    stop = true;
    attack.join();
    EXPECT_EQ(answered, 20) << "a failed request got: " << failure;
    EXPECT_GE(opened.load(), 64) << "the dripping connections were not twice the cap";
}

TEST_F(ServerFlags, ReadDeadlineClosesADrippingRequest) {
    wait_until_served();
    RawConn c(s().port());
    c.send_all("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    const auto t0 = clock_type::now();
    while (!c.closed_by_server() && seconds_since(t0) < 10) {
        c.send_all("X");
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const double took = seconds_since(t0);
    EXPECT_TRUE(c.closed_by_server());
    EXPECT_GE(took, 4.7) << "closed before the 5 s deadline";
    EXPECT_LT(took, 8.5) << "the deadline is not --read-deadline 5 (the default is 10 s)";
}

// 40 MB of prompt under a 64 MiB body limit: refused by its bytes, without tokenizing it, for a
// completion and for a chat message alike. The message is the byte bound's (said before any
// tokenizing). The time is a second guard, against a baseline on the same machine at the same
// moment: the same body with one field of the wrong type, refused once parsed. Tokenizing 40 MiB
// takes several times that (8-10 s against ~1.3 s on a quiet 2-core Zen 4); reading, parsing and
// rendering it take about the same. A second try when the first is over the bound (a busy
// machine).
TEST_F(ServerFlags, PromptTooLongByItsBytesIs400BeforeTokenizing) {
    const std::string text(40 << 20, 'a');
    const json completion = {{"prompt", text}, {"max_tokens", 1}};
    const json chat = {{"messages", {{{"role", "user"}, {"content", text}}}}, {"max_tokens", 1}};
    for (const auto& [path, request] : std::vector<std::pair<std::string, json>>{
             {"/v1/completions", completion}, {"/v1/chat/completions", chat}}) {
        json wrong_type = request;
        wrong_type["max_tokens"] = "one";
        const std::string body = request.dump(), baseline_body = wrong_type.dump();
        double took = 1e9, baseline = 1e9;
        for (int attempt = 0; attempt == 0 || (attempt < 2 && took >= 3 * baseline + 1.0);
             ++attempt) {
            auto t0 = clock_type::now();
            auto res = s().client().Post(path, baseline_body, "application/json");
            baseline = std::min(baseline, seconds_since(t0));
            expect_error(res, 400, "max_tokens");
            t0 = clock_type::now();
            res = s().client().Post(path, body, "application/json");
            took = std::min(took, seconds_since(t0));
            expect_error(res, 400, "bytes, so at least");
            expect_error(res, 400, "but the context holds 256");
        }
        std::fprintf(stderr, "%s: 40 MiB prompt refused in %.2f s (a wrong field: %.2f s)\n",
                     path.c_str(), took, baseline);
        EXPECT_LT(took, 3 * baseline + 1.0) << path << ": tokenized before refusing?";
    }
    // A prompt that could fit by its bytes still gets the token check.
    std::string words;
    for (int i = 0; i < 300; ++i) words += " a";
    expect_error(
        s().client().Post("/v1/completions", json{{"prompt", words}, {"max_tokens", 1}}.dump(),
                          "application/json"),
        400, "tokens but the context holds 256");
}

// Output (stdout + stderr) and exit status of a shell command.
std::pair<std::string, int> shell(const std::string& cmd) {
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    if (!p) throw std::runtime_error("popen failed");
    std::string out;
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, k);
    const int st = pclose(p);
    return {out, WIFEXITED(st) ? WEXITSTATUS(st) : -1};
}

TEST(ServerStartup, WarnsWhenReachableFromOtherMachinesWithoutAKey) {
    // Stopped by timeout once it has printed its startup lines.
    auto [out, st] = shell("timeout -s INT 4 " + specula::test::specula_bin() + " serve -m '" +
                           target_path() + "' --host 0.0.0.0 --port 0");
    EXPECT_NE(out.find("listening on http://0.0.0.0:"), std::string::npos) << out;
    EXPECT_NE(out.find("warning: 0.0.0.0 is reachable from other machines and no --api-key"),
              std::string::npos)
        << out;
    auto [quiet, st2] = shell("timeout -s INT 4 " + specula::test::specula_bin() + " serve -m '" +
                              target_path() + "' --host 0.0.0.0 --port 0 --api-key k");
    EXPECT_NE(quiet.find("listening on"), std::string::npos) << quiet;
    EXPECT_EQ(quiet.find("warning:"), std::string::npos) << quiet;
}

TEST(ServerStartup, RefusesAnUnlimitedOrZeroBodyLimit) {
    for (const std::string v : {"-1", "0", "4294967296"}) {
        auto [out, st] = shell("timeout 20 " + specula::test::specula_bin() + " serve -m '" +
                               target_path() + "' --port 0 --max-body-bytes " + v);
        EXPECT_EQ(st, 1) << v << ": " << out;
        EXPECT_NE(out.find("--max-body-bytes must be in [1, 1073741824]"), std::string::npos)
            << out;
    }
}

TEST(ServerStartup, ConnectionFlagsAreRangeCheckedBeforeLoading) {
    // The model path does not exist: the flag must be refused first.
    for (const auto& [flag, v, msg] :
         std::vector<std::tuple<std::string, std::string, std::string>>{
             {"--max-connections", "0", "--max-connections must be in [1, 4096], got 0"},
             {"--max-connections", "4097", "--max-connections must be in [1, 4096], got 4097"},
             {"--max-connections", "-5", "--max-connections must be in [1, 4096], got -5"},
             {"--read-deadline", "0", "--read-deadline must be in [0.1, 3600] seconds, got 0"},
             {"--read-deadline", "-1", "--read-deadline must be in [0.1, 3600] seconds"},
             {"--read-deadline", "nan", "--read-deadline must be in [0.1, 3600] seconds"},
             {"--read-deadline", "1e9", "--read-deadline must be in [0.1, 3600] seconds"},
             {"--max-body-bytes", "0", "--max-body-bytes must be in [1, 1073741824]"},
             {"--max-connections-per-client", "300",
              "--max-connections-per-client must be in [1, --max-connections = 256] (0: half "
              "of it), got 300"},
             {"--max-connections-per-client", "-1",
              "--max-connections-per-client must be in [1, --max-connections = 256]"}}) {
        auto [out, st] = shell("timeout 20 " + specula::test::specula_bin() +
                               " serve -m /nonexistent/model.gguf --port 0 " + flag + " " + v);
        EXPECT_EQ(st, 1) << flag << " " << v << ": " << out;
        EXPECT_NE(out.find(msg), std::string::npos) << flag << " " << v << ": " << out;
        EXPECT_EQ(out.find("nonexistent"), std::string::npos) << "loaded first: " << out;
    }
}

// Once listening, SIGTERM is a clean stop: its own line, status 0.
TEST(ServerStartup, SigtermOnceListeningStopsCleanly) {
    auto [out, st] = shell("timeout --preserve-status -s TERM 5 " + specula::test::specula_bin() +
                           " serve -m '" + target_path() + "' --port 0 -t 1");
    EXPECT_NE(out.find("listening on"), std::string::npos) << out;
    EXPECT_NE(out.find("serve: SIGTERM, draining"), std::string::npos) << out;
    EXPECT_EQ(st, 0) << out;
}

}  // namespace
