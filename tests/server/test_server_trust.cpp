// What an operator must be able to trust (issue #27), against the real `specula serve` on a free
// loopback port: ambiguous framing (Content-Length with Transfer-Encoding, conflicting lengths)
// is 400 and closes the connection, so a request smuggled behind it is never answered; a huge
// Content-Length is 413 at once; JSON nested past 128 levels is 400 before it is parsed; with
// --api-key every route but /health and / needs the key (/tokenize and /detokenize too); idle
// sockets from one client address never keep another client out (per-client share, idle closed
// first near the cap); `run -f /dev/zero` stops at the text-file limit.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli_process.h"
#include "server/raw_conn.h"
#include "server/server_process.h"
#include "test_util.h"

namespace {

using json = nlohmann::json;
using specula::test::RawConn;
using specula::test::ServerProcess;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

int status_of(const std::string& response) {
    if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return 0;
    return std::stoi(response.substr(9, 3));
}

int count_responses(const std::string& wire) {
    int n = 0;
    for (size_t p = wire.find("HTTP/1.1 "); p != std::string::npos;
         p = wire.find("HTTP/1.1 ", p + 1))
        ++n;
    return n;
}

const std::string kKey = "sekret";

class ServerTrust : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        server_ = std::make_unique<ServerProcess>(
            std::vector<std::string>{"-m", specula::test::server_target_path(), "-c", "256", "-t",
                                     "1", "--api-key", kKey, "--max-connections", "8"},
            "trust");
    }
    static void TearDownTestSuite() { server_.reset(); }
    static std::unique_ptr<ServerProcess> server_;
    const ServerProcess& s() { return *server_; }

    // The full wire response of a raw request sent from `from` (the server closes, or 5 s pass).
    std::string raw(const std::string& request, const char* from = "127.0.0.1") {
        RawConn c(s().port(), from);
        EXPECT_TRUE(c.send_all(request));
        return c.read_until_close(5);
    }
    // GET /health from `from` answers 200 (within 5 s).
    bool healthy_from(const char* from) {
        return status_of(raw("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                             from)) == 200;
    }
    // Until the connections of an earlier test are gone.
    void wait_until_served() {
        const auto t0 = clock_type::now();
        while (seconds_since(t0) < 10 && !healthy_from("127.0.0.9"))
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
};
std::unique_ptr<ServerProcess> ServerTrust::server_;

const std::string kHead =
    "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    "Authorization: Bearer " +
    kKey + "\r\n";
const std::string kBody = R"({"content": "Lily"})";
const std::string kSmuggled = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

TEST_F(ServerTrust, ContentLengthWithTransferEncodingIs400AndCloses) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "%zx", kBody.size());
    const std::string res = raw(kHead + "Content-Length: " + std::to_string(kBody.size()) +
                                "\r\nTransfer-Encoding: chunked\r\n\r\n" + hex + "\r\n" + kBody +
                                "\r\n0\r\n\r\n" + kSmuggled);
    EXPECT_EQ(status_of(res), 400) << res;
    EXPECT_NE(res.find("both Content-Length and Transfer-Encoding"), std::string::npos) << res;
    EXPECT_EQ(count_responses(res), 1) << "the smuggled request was answered: " << res;
}

TEST_F(ServerTrust, ConflictingContentLengthsAre400AndClose) {
    const std::string res = raw(kHead + "Content-Length: " + std::to_string(kBody.size()) +
                                "\r\nContent-Length: 3\r\n\r\n" + kBody + kSmuggled);
    EXPECT_EQ(status_of(res), 400) << res;
    EXPECT_NE(
        res.find("conflicting Content-Length headers (" + std::to_string(kBody.size()) + ", 3)"),
        std::string::npos)
        << res;
    EXPECT_EQ(count_responses(res), 1) << "the smuggled request was answered: " << res;
    // The same length twice is one length: served.
    const std::string len = "Content-Length: " + std::to_string(kBody.size()) + "\r\n";
    const std::string ok = raw(kHead + len + len + "Connection: close\r\n\r\n" + kBody);
    EXPECT_EQ(status_of(ok), 200) << ok;
}

TEST_F(ServerTrust, AHugeContentLengthIs413AtOnce) {
    const auto t0 = clock_type::now();
    const std::string res = raw(kHead + "Content-Length: 99999999999\r\n\r\n");
    EXPECT_EQ(status_of(res), 413) << res;
    EXPECT_NE(res.find("larger than the limit of 1048576 bytes"), std::string::npos) << res;
    EXPECT_LT(seconds_since(t0), 2.0) << "413 only after the read deadline";
}

TEST_F(ServerTrust, JsonNestedDeeperThan128LevelsIs400BeforeParsing) {
    auto c = s().client();
    c.set_bearer_token_auth(kKey);
    const auto t0 = clock_type::now();
    auto deep = c.Post("/v1/completions", std::string(1000000, '['), "application/json");
    ASSERT_TRUE(deep);
    EXPECT_EQ(deep->status, 400) << deep->body;
    EXPECT_NE(deep->body.find("deeper than the limit of 128 levels"), std::string::npos)
        << deep->body;
    EXPECT_LT(seconds_since(t0), 2.0);
    // 129 levels inside a field: refused by depth; 127 (plus the outer object): parsed, and
    // refused for the field's type instead. Brackets inside strings do not count.
    const auto nested = [](int n) { return std::string(n, '[') + std::string(n, ']'); };
    auto over = c.Post("/tokenize", R"({"content": )" + nested(128) + "}", "application/json");
    ASSERT_TRUE(over);
    EXPECT_EQ(over->status, 400);
    EXPECT_NE(over->body.find("deeper than the limit of 128"), std::string::npos) << over->body;
    auto under = c.Post("/tokenize", R"({"content": )" + nested(127) + "}", "application/json");
    ASSERT_TRUE(under);
    EXPECT_EQ(under->body.find("deeper than the limit"), std::string::npos) << under->body;
    auto text =
        c.Post("/tokenize", json{{"content", std::string(300, '[')}}.dump(), "application/json");
    ASSERT_TRUE(text);
    EXPECT_EQ(text->status, 200) << text->body;
}

TEST_F(ServerTrust, EveryRouteButHealthNeedsTheKey) {
    const std::vector<std::pair<std::string, std::string>> posts = {
        {"/tokenize", R"({"content": "Lily"})"},
        {"/detokenize", R"({"tokens": [1, 5]})"},
        {"/apply-template", R"({"messages": [{"role": "user", "content": "hi"}]})"}};
    for (const auto& [path, body] : posts) {
        auto no = s().client().Post(path, body, "application/json");
        ASSERT_TRUE(no) << path;
        EXPECT_EQ(no->status, 401) << path << ": " << no->body;
        auto c = s().client();
        c.set_bearer_token_auth(kKey);
        auto yes = c.Post(path, body, "application/json");
        ASSERT_TRUE(yes) << path;
        EXPECT_EQ(yes->status, 200) << path << ": " << yes->body;
    }
    for (const std::string path : {"/metrics", "/props", "/slots", "/v1/models"}) {
        auto no = s().client().Get(path);
        ASSERT_TRUE(no) << path;
        EXPECT_EQ(no->status, 401) << path;
    }
    for (const std::string path : {"/health", "/"}) {
        auto open = s().client().Get(path);
        ASSERT_TRUE(open) << path;
        EXPECT_EQ(open->status, 200) << path;
    }
}

// One client opens more idle sockets than its share (half of --max-connections 8): its oldest are
// closed as it goes; another client is served at once.
TEST_F(ServerTrust, OneClientsIdleSocketsNeverKeepAnotherOut) {
    wait_until_served();
    std::vector<std::unique_ptr<RawConn>> idle;
    for (int i = 0; i < 12; ++i) {
        idle.push_back(std::make_unique<RawConn>(s().port(), "127.0.0.5"));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto t0 = clock_type::now();
    EXPECT_TRUE(healthy_from("127.0.0.2"));
    EXPECT_LT(seconds_since(t0), 1.0);
    int open = 0;
    for (auto& c : idle) open += c->closed_by_server() ? 0 : 1;
    EXPECT_LE(open, 4) << "a client kept more than its share";
    EXPECT_GE(open, 1) << "its newest connections are served";
}

// Two clients, each within its share, fill the cap with idle sockets: a third is still served
// (an idle one is closed for it).
TEST_F(ServerTrust, IdleConnectionsAreClosedFirstNearTheCap) {
    wait_until_served();
    std::vector<std::unique_ptr<RawConn>> idle;
    for (int i = 0; i < 8; ++i) {
        idle.push_back(std::make_unique<RawConn>(s().port(), i % 2 ? "127.0.0.6" : "127.0.0.7"));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(healthy_from("127.0.0.3")) << "try " << i;
}

// A served model file changed on disk: the next request is 503 naming the file (never a crash,
// never a reply computed from the changed bytes), and the server keeps answering /health.
enum class Change { truncate, overwrite };

std::string copy_to_temp(const std::string& from, const std::string& name) {
    const std::string path = specula::test::temp_dir("trust-model") + "/" + name;
    std::filesystem::copy_file(from, path, std::filesystem::copy_options::overwrite_existing);
    return path;
}

void change_file(const std::string& path, Change how) {
    const std::string bytes = specula::test::read_file(path);
    if (how == Change::truncate) {  // as `cp smaller.gguf served.gguf`: the same inode, shorter
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(bytes.data(), std::streamsize(bytes.size() / 2));
    } else {  // the same size, other bytes in the middle of the weights
        std::fstream out(path, std::ios::in | std::ios::out | std::ios::binary);
        out.seekp(std::streamoff(bytes.size() / 2));
        const std::string junk(4096, char(0x7f));
        out.write(junk.data(), std::streamsize(junk.size()));
    }
}

void expect_refused_after_change(bool draft, Change how) {
    const std::string target = specula::test::server_target_path();
    const std::string changed =
        copy_to_temp(draft ? specula::test::server_draft_path() : target,
                     std::string(draft ? "draft" : "target") +
                         (how == Change::truncate ? "-cut" : "-over") + ".gguf");
    std::vector<std::string> args = {"-m", draft ? target : changed, "-c", "256", "-t", "1"};
    if (draft) args.insert(args.end(), {"-md", changed, "--draft", "3"});
    ServerProcess srv(args, "trust-file");
    const std::string body = R"({"prompt": "Lily", "max_tokens": 8, "temperature": 0})";
    auto ok = srv.client().Post("/v1/completions", body, "application/json");
    ASSERT_TRUE(ok);
    ASSERT_EQ(ok->status, 200) << ok->body;
    change_file(changed, how);
    for (int i = 0; i < 2; ++i) {
        auto res = srv.client().Post("/v1/completions", body, "application/json");
        ASSERT_TRUE(res) << "no answer: the server died";
        EXPECT_EQ(res->status, 503) << res->body;
        const json j = json::parse(res->body, nullptr, false);
        ASSERT_TRUE(j.contains("error")) << res->body;
        const std::string msg = j["error"]["message"].get<std::string>();
        EXPECT_NE(msg.find(changed), std::string::npos) << msg;
        EXPECT_NE(msg.find("changed on disk"), std::string::npos) << msg;
        EXPECT_EQ(j["error"]["code"], "model_file_changed") << res->body;
    }
    auto health = srv.client().Get("/health");
    ASSERT_TRUE(health) << "the server died";
}

TEST(ServerModelFile, TargetTruncatedOnDiskIs503NotACrash) {
    expect_refused_after_change(false, Change::truncate);
}
TEST(ServerModelFile, TargetOverwrittenInPlaceIs503NotGarbage) {
    expect_refused_after_change(false, Change::overwrite);
}
TEST(ServerModelFile, DraftTruncatedOnDiskIs503NotACrash) {
    expect_refused_after_change(true, Change::truncate);
}
TEST(ServerModelFile, DraftOverwrittenInPlaceIs503NotGarbage) {
    expect_refused_after_change(true, Change::overwrite);
}

// Truncated while a stream generates: the pass that touches a vanished page survives the SIGBUS
// (gguf/mapping_guard.h), no token computed after the change is sent, and the stream ends with an
// error event naming the file. (500 tokens take far longer than the client takes to react to the
// first event.)
TEST(ServerModelFile, TruncatedMidStreamEndsTheStreamWithAnError) {
    const std::string changed = copy_to_temp(specula::test::server_target_path(), "mid.gguf");
    ServerProcess srv({"-m", changed, "--max-model-len", "512", "-t", "1"}, "trust-mid");
    const std::string body = json{
        {"prompt", "Once"},
        {"max_tokens", 500},
        {"ignore_eos", true},
        {"stream", true}}.dump();
    RawConn c(srv.port());
    ASSERT_TRUE(
        c.send_all("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                   "application/json\r\nConnection: close\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n" + body));
    std::string events;
    bool truncated = false;
    const auto t0 = clock_type::now();
    while (!truncated && seconds_since(t0) < 30) {
        events += c.read_some(0.05);
        if (events.find("data: ") != std::string::npos) {
            std::filesystem::resize_file(changed, 4096);
            truncated = true;
        }
    }
    events += c.read_until_close(30);
    ASSERT_TRUE(truncated) << events.substr(0, 300);
    EXPECT_EQ(events.find("data: [DONE]"), std::string::npos) << "the stream ran to its end";
    EXPECT_NE(events.find("\"error\""), std::string::npos) << events.substr(events.size() - 400);
    EXPECT_NE(events.find(changed + ": the model file changed on disk"), std::string::npos)
        << events.substr(events.size() > 400 ? events.size() - 400 : 0);
    auto health = srv.client().Get("/health");
    ASSERT_TRUE(health) << "the server died";
    auto after = srv.client().Post("/v1/completions", R"({"prompt": "x", "max_tokens": 2})",
                                   "application/json");
    ASSERT_TRUE(after);
    EXPECT_EQ(after->status, 503) << after->body;
}

TEST(ServerTrustCli, APromptFileIsReadUpToALimit) {
    const auto t0 = clock_type::now();
    const auto r = specula::test::run_specula(
        {"run", "-m", specula::test::server_target_path(), "-f", "/dev/zero", "-n", "1"});
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find("/dev/zero: larger than the limit of 67108864 bytes"), std::string::npos)
        << r.err;
    EXPECT_LT(seconds_since(t0), 10.0);
}

}  // namespace
