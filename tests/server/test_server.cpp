// End-to-end tests of `specula serve`: the real binary is started on a free loopback port with
// the stories260K target and the llama2xs draft (../shared/models/tinystories) and queried over
// HTTP. Greedy output must equal `specula run --temp 0`, streaming must equal non-streaming,
// concurrent clients must each get their single-client output, every bad input must get its
// status and OpenAI-shaped error, /metrics must count exactly what the responses' usage reports,
// and a client that disconnects must cancel its generation.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "server/server_process.h"
#include "test_util.h"

namespace {

using json = nlohmann::json;
using specula::test::ServerProcess;
using specula::test::shared_path;

std::string target_path() {
    return specula::test::server_target_path();
}
std::string draft_path() {
    return specula::test::server_draft_path();
}

// `specula run --temp 0` stdout for a prompt (the reference for greedy server output).
std::string specula_run_greedy(const std::string& prompt, int n) {
    const std::string cmd = specula::test::specula_bin() + " run -m '" + target_path() + "' -p '" +
                            prompt + "' -n " + std::to_string(n) + " --temp 0 -t 1 2>/dev/null";
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) throw std::runtime_error("popen failed");
    std::string out;
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, k);
    EXPECT_EQ(pclose(p), 0) << cmd;
    return out;
}

struct Reply {
    int status = 0;
    json body;
};

Reply post(const ServerProcess& s, const std::string& path, const std::string& body,
           const httplib::Headers& headers = {}) {
    auto res = s.client().Post(path.c_str(), headers, body, "application/json");
    if (!res) throw std::runtime_error("no response from " + path);
    Reply r{res->status, json::parse(res->body, nullptr, false)};
    return r;
}

json completion(const ServerProcess& s, json req, bool chat = false) {
    Reply r = post(s, chat ? "/v1/chat/completions" : "/v1/completions", req.dump());
    EXPECT_EQ(r.status, 200) << r.body.dump();
    return r.body;
}

struct Streamed {
    std::string content;     // concatenated text / delta.content
    std::string token_text;  // concatenated specula.tokens[].text
    int n_drafted = 0, n_target = 0;
    int n_waiting_probes = 0;  // SSE comments sent while queued for a slot
    json final_chunk;
    json usage;  // the include_usage chunk's (null without one)
    bool done = false;
};

Streamed stream(const ServerProcess& s, json req, bool chat) {
    req["stream"] = true;
    Streamed out;
    std::string buf;
    auto res = s.client().Post(chat ? "/v1/chat/completions" : "/v1/completions", {}, req.dump(),
                               "application/json");
    if (!res) throw std::runtime_error("no response to a streaming request");
    EXPECT_EQ(res->status, 200) << res->body;
    std::string body = res->body;
    size_t pos = 0;
    while ((pos = body.find("\n\n")) != std::string::npos) {
        std::string event = body.substr(0, pos);
        body.erase(0, pos + 2);
        if (event.rfind(": waiting", 0) == 0) {  // SSE comment: the probe of a queued request
            EXPECT_TRUE(out.content.empty()) << "probes come before any text";
            ++out.n_waiting_probes;
            continue;
        }
        if (event.rfind("data: ", 0) != 0) {
            ADD_FAILURE() << "not an SSE data event: " << event;
            continue;
        }
        const std::string data = event.substr(6);
        if (data == "[DONE]") {
            out.done = true;
            continue;
        }
        EXPECT_FALSE(out.done) << "data after [DONE]";
        json chunk = json::parse(data);
        EXPECT_FALSE(out.usage.is_object()) << "the usage chunk is the last";
        if (chunk.contains("usage")) {
            EXPECT_TRUE(chunk["choices"].empty()) << "the usage chunk has no choices";
            out.usage = chunk["usage"];
            continue;
        }
        const json& choice = chunk["choices"][0];
        if (!choice["finish_reason"].is_null()) out.final_chunk = chunk;
        out.content += chat ? choice["delta"].value("content", "") : choice.value("text", "");
        if (choice.contains("specula")) {
            for (const auto& t : choice["specula"]["tokens"]) {
                out.token_text += t["text"].get<std::string>();
                (t["drafted"].get<bool>() ? out.n_drafted : out.n_target) += 1;
            }
        }
    }
    EXPECT_TRUE(body.empty()) << "trailing bytes: " << body;
    return out;
}

std::map<std::string, double> metrics(const ServerProcess& s) {
    auto res = s.client().Get("/metrics");
    EXPECT_TRUE(res && res->status == 200);
    std::map<std::string, double> m;
    std::istringstream in(res ? res->body : "");
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        const size_t sp = line.rfind(' ');
        m[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
    }
    return m;
}

// Output of a shell command (stdout and stderr) and its exit status.
std::pair<std::string, int> shell(const std::string& cmd) {
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    if (!p) throw std::runtime_error("popen failed");
    std::string out;
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, k);
    return {out, pclose(p)};
}

// Token ids of `text` from `specula tokenize --ids -f` (the text goes through a file, byte for
// byte).
std::vector<std::string> tokenize_ids(const std::string& model, const std::string& text) {
    const std::string path = specula::test::temp_dir("server") + "/prompt.txt";
    std::ofstream(path, std::ios::binary) << text;
    auto [ids, status] = shell("(" + specula::test::specula_bin() + " tokenize -m '" + model +
                               "' --ids -f '" + path + "' 2>/dev/null)");
    EXPECT_EQ(status, 0) << ids;
    std::istringstream in(ids);
    std::vector<std::string> out;
    for (std::string id; in >> id;) out.push_back(id);
    return out;
}

class ServerTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        server_ = std::make_unique<ServerProcess>(
            std::vector<std::string>{"-m", target_path(), "-md", draft_path(), "--draft", "4",
                                     "--parallel", "4", "-t", "4", "--max-model-len", "2048",
                                     "--max-body-bytes", "65536"},
            "main");
    }
    static void TearDownTestSuite() { server_.reset(); }
    static std::unique_ptr<ServerProcess> server_;
    const ServerProcess& s() { return *server_; }
};
std::unique_ptr<ServerProcess> ServerTest::server_;

TEST_F(ServerTest, HealthAndModels) {
    auto res = s().client().Get("/v1/models");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    json j = json::parse(res->body);
    EXPECT_EQ(j["data"][0]["id"], "stories260K");
    auto ui = s().client().Get("/");
    ASSERT_TRUE(ui);
    EXPECT_EQ(ui->status, 200);
    EXPECT_NE(ui->body.find("/v1/chat/completions"), std::string::npos);
}

TEST_F(ServerTest, GreedyCompletionEqualsSpeculaRun) {
    for (const std::string prompt : {"Lily saw a big red", "Once upon a time, a cat"}) {
        const std::string expected = specula_run_greedy(prompt, 40);
        ASSERT_FALSE(expected.empty());
        json r = completion(s(), {{"prompt", prompt}, {"max_tokens", 40}, {"temperature", 0}});
        EXPECT_EQ(r["choices"][0]["text"], expected) << prompt;
        EXPECT_EQ(r["object"], "text_completion");
        const json& u = r["usage"];
        EXPECT_EQ(u["completion_tokens"], 40);
        EXPECT_EQ(u["total_tokens"].get<int>(),
                  u["prompt_tokens"].get<int>() + u["completion_tokens"].get<int>());
        EXPECT_GT(u["speculative"]["drafted"].get<int>(), 0);
        EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
        // Plain decoding (per-request draft length 0) gives the same text, with no drafts.
        json plain = completion(s(), {{"prompt", prompt},
                                      {"max_tokens", 40},
                                      {"temperature", 0},
                                      {"speculative", {{"num_speculative_tokens", 0}}}});
        EXPECT_EQ(plain["choices"][0]["text"], expected);
        EXPECT_EQ(plain["usage"]["speculative"]["drafted"], 0);
        // A shorter per-request draft length caps every draft.
        json two = completion(s(), {{"prompt", prompt},
                                    {"max_tokens", 40},
                                    {"temperature", 0},
                                    {"speculative", {{"num_speculative_tokens", 2}}}});
        EXPECT_EQ(two["choices"][0]["text"], expected);
        EXPECT_LE(two["usage"]["speculative"]["accepted_per_pos"].size(), 2u);
    }
}

TEST_F(ServerTest, StreamingEqualsNonStreamingAndMarksDraftTokens) {
    for (bool chat : {false, true}) {
        json req = {{"max_tokens", 60}, {"temperature", 0}};
        if (chat) {
            req["messages"] = {{{"role", "user"}, {"content", "Tell me a story about a dog."}}};
        } else {
            req["prompt"] = "The little dog";
        }
        json full = completion(s(), req, chat);
        const std::string text = chat ? full["choices"][0]["message"]["content"].get<std::string>()
                                      : full["choices"][0]["text"].get<std::string>();
        Streamed plain_stream = stream(s(), req, chat);
        EXPECT_TRUE(plain_stream.usage.is_null()) << "no usage chunk without include_usage";
        EXPECT_FALSE(plain_stream.final_chunk.contains("usage"));
        req["stream_options"] = {{"include_usage", true}};
        Streamed st = stream(s(), req, chat);
        EXPECT_TRUE(st.done);
        EXPECT_EQ(st.content, text);
        EXPECT_EQ(st.token_text, text);
        EXPECT_GT(st.n_drafted, 0);
        EXPECT_GT(st.n_target, 0);
        ASSERT_TRUE(st.usage.is_object());
        const json& spec = st.usage["speculative"];
        EXPECT_EQ(spec["accepted"].get<int>(), st.n_drafted);
        // Equal but for the prompt tokens found cached (prefix reuse: the streamed request runs
        // second, in a slot that may hold the same prompt).
        json su = st.usage, fu = full["usage"];
        EXPECT_LE(su["prompt_tokens_details"]["cached_tokens"].get<int>(),
                  su["prompt_tokens"].get<int>() - 1);
        su.erase("prompt_tokens_details");
        fu.erase("prompt_tokens_details");
        EXPECT_EQ(su, fu);
        // The finish chunk keeps the speculative block (in its specula object).
        EXPECT_EQ(st.final_chunk["choices"][0]["specula"]["speculative"], spec);
        EXPECT_EQ(st.final_chunk["object"], chat ? "chat.completion.chunk" : "text_completion");
    }
}

// The README's curl commands: a plain completion and a streamed chat, through the curl binary.
TEST_F(ServerTest, CurlCompletionAndStreamedChat) {
    const std::string base = "http://127.0.0.1:" + std::to_string(s().port());
    const std::string body =
        R"({"prompt": "Lily saw a big red", "max_tokens": 24, "temperature": 0})";
    auto [out, status] =
        shell("curl -sS --max-time 60 " + base +
              "/v1/completions -H 'Content-Type: application/json' -d '" + body + "'");
    ASSERT_EQ(status, 0) << out;
    const json r = json::parse(out, nullptr, false);
    ASSERT_FALSE(r.is_discarded()) << out;
    EXPECT_EQ(r["choices"][0]["text"], specula_run_greedy("Lily saw a big red", 24));

    const std::string chat =
        R"({"messages": [{"role": "user", "content": "Tell me a story"}], "stream": true, )"
        R"("max_tokens": 16, "temperature": 0})";
    auto [sse, st2] =
        shell("curl -sSN --max-time 60 " + base +
              "/v1/chat/completions -H 'Content-Type: application/json' -d '" + chat + "'");
    ASSERT_EQ(st2, 0) << sse;
    EXPECT_NE(sse.find("data: {"), std::string::npos) << sse;
    const std::string done = "data: [DONE]\n\n";
    ASSERT_GE(sse.size(), done.size());
    EXPECT_EQ(sse.substr(sse.size() - done.size()), done) << sse;
    // The streamed deltas add up to the non-streamed reply.
    std::string text;
    std::istringstream in(sse);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("data: {", 0) != 0) continue;
        const json c = json::parse(line.substr(6));
        text += c["choices"][0]["delta"].value("content", "");
    }
    json req = json::parse(chat);
    req.erase("stream");
    const json full = completion(s(), req, /*chat=*/true);
    EXPECT_EQ(text, full["choices"][0]["message"]["content"].get<std::string>());
    EXPECT_FALSE(text.empty());
}

TEST_F(ServerTest, StopStringsCutTheText) {
    json full =
        completion(s(), {{"prompt", "Lily saw a big red"}, {"max_tokens", 40}, {"temperature", 0}});
    const std::string text = full["choices"][0]["text"];
    // Stop at the second word of the reply, given as a string and inside an array.
    const size_t at = text.find(' ', 1);
    ASSERT_NE(at, std::string::npos);
    const std::string stop = text.substr(at, 4);
    for (json stop_field : {json(stop), json::array({"never-appears", stop})}) {
        json r = completion(s(), {{"prompt", "Lily saw a big red"},
                                  {"max_tokens", 40},
                                  {"temperature", 0},
                                  {"stop", stop_field}});
        EXPECT_EQ(r["choices"][0]["text"], text.substr(0, text.find(stop)));
        EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
        Streamed st = stream(s(),
                             {{"prompt", "Lily saw a big red"},
                              {"max_tokens", 40},
                              {"temperature", 0},
                              {"stop", stop_field}},
                             false);
        EXPECT_EQ(st.content, text.substr(0, text.find(stop)));
        EXPECT_EQ(st.final_chunk["choices"][0]["finish_reason"], "stop");
    }
}

TEST_F(ServerTest, ConcurrentStreamingClientsGetIndependentOutputs) {
    const std::vector<std::string> prompts = {"Lily saw a big red",
                                              "Once upon a time, a cat",
                                              "The little dog",
                                              "Tom had a ball",
                                              "The sun was",
                                              "A bird sang",
                                              "Sue and Ben went to the park",
                                              "Mom said"};
    std::vector<std::string> single;
    for (const auto& p : prompts) {
        single.push_back(completion(
            s(), {{"prompt", p}, {"max_tokens", 32}, {"temperature", 0}})["choices"][0]["text"]);
    }
    auto before = metrics(s());
    std::vector<Streamed> got(prompts.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < prompts.size(); ++i) {
        threads.emplace_back([&, i] {
            got[i] = stream(s(), {{"prompt", prompts[i]}, {"max_tokens", 32}, {"temperature", 0}},
                            false);
        });
    }
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(got[i].content, single[i]) << prompts[i];
        EXPECT_TRUE(got[i].done);
    }
    // The draft model ran batched across the 4 slots: its passes drafted for several each.
    auto after = metrics(s());
    const double passes =
        after["specula:draft_batch_passes_total"] - before["specula:draft_batch_passes_total"];
    const double seqs = after["specula:draft_batch_sequences_total"] -
                        before["specula:draft_batch_sequences_total"];
    EXPECT_GT(passes, 0);
    EXPECT_GT(seqs, 1.5 * passes) << seqs << " sequences in " << passes << " draft passes";
    // Seeded sampling is reproducible too.
    json req = {
        {"prompt", "Tom had a ball"}, {"max_tokens", 30}, {"temperature", 0.9}, {"seed", 1234}};
    EXPECT_EQ(completion(s(), req)["choices"][0]["text"],
              completion(s(), req)["choices"][0]["text"]);
}

void expect_error(const Reply& r, int status, const std::string& param = "") {
    EXPECT_EQ(r.status, status) << r.body.dump();
    ASSERT_TRUE(r.body.is_object()) << "status " << status;
    ASSERT_TRUE(r.body.contains("error")) << r.body.dump();
    const json& e = r.body["error"];
    EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty());
    EXPECT_TRUE(e["type"].is_string());
    EXPECT_TRUE(e.contains("param") && e.contains("code"));
    if (!param.empty()) {
        EXPECT_EQ(e["param"], param) << e.dump();
    }
}

TEST_F(ServerTest, BadRequestsGetOpenAIErrors) {
    expect_error(post(s(), "/v1/completions", "{\"prompt\": "), 400);
    expect_error(post(s(), "/v1/completions", "[1, 2]"), 400);
    expect_error(post(s(), "/v1/completions", R"({"max_tokens": 4})"), 400, "prompt");
    expect_error(post(s(), "/v1/chat/completions", R"({"prompt": "hi"})"), 400, "messages");
    expect_error(post(s(), "/v1/chat/completions", R"({"messages": [{"role": "robot",
                 "content": "x"}]})"),
                 400, "messages[0].role");
    expect_error(post(s(), "/v1/completions", R"({"prompt": "a", "max_tokens": "many"})"), 400,
                 "max_tokens");
    expect_error(post(s(), "/v1/completions", R"({"prompt": "a", "temperature": "hot"})"), 400,
                 "temperature");
    expect_error(post(s(), "/v1/completions", R"({"prompt": "a", "stop": 5})"), 400, "stop");
    expect_error(post(s(), "/v1/completions", R"({"prompt": "a", "stream": "yes"})"), 400,
                 "stream");
    expect_error(post(s(), "/v1/completions", R"({"prompt": "a", "n": 17})"), 400, "n");
    // The context is 2048 tokens: a longer prompt, and a budget past it.
    std::string long_prompt;
    for (int i = 0; i < 1200; ++i) long_prompt += "the cat ";
    expect_error(post(s(), "/v1/completions", json({{"prompt", long_prompt}}).dump()), 400,
                 "prompt");
    expect_error(post(s(), "/v1/completions", R"({"prompt": "a", "max_tokens": 5000})"), 400,
                 "max_tokens");
    expect_error(post(s(), "/v1/completions",
                      R"({"prompt": "a", "speculative": {"num_speculative_tokens": -1}})"),
                 400, "speculative.num_speculative_tokens");
    // The server was started with --max-body-bytes 65536.
    expect_error(post(s(), "/v1/completions", json({{"prompt", std::string(70000, 'a')}}).dump()),
                 413);
    auto res = s().client().Get("/no/such/path");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 404);
    // ...and it keeps serving.
    json ok = completion(s(), {{"prompt", "Tom had a ball"}, {"max_tokens", 5}});
    EXPECT_EQ(ok["usage"]["completion_tokens"].get<int>(), 5);
}

TEST_F(ServerTest, MetricsCountExactlyWhatUsageReports) {
    auto before = metrics(s());
    long drafts = 0, drafted = 0, accepted = 0, prompt = 0, gen = 0;
    std::vector<long> per_pos(8, 0);
    for (const std::string p : {"Mom said", "A bird sang", "The sun was"}) {
        json u = completion(s(), {{"prompt", p}, {"max_tokens", 32}, {"temperature", 0}})["usage"];
        drafts += u["speculative"]["drafts"].get<long>();
        drafted += u["speculative"]["drafted"].get<long>();
        accepted += u["speculative"]["accepted"].get<long>();
        prompt += u["prompt_tokens"].get<long>();
        gen += u["completion_tokens"].get<long>();
        const auto& pos = u["speculative"]["accepted_per_pos"];
        for (size_t i = 0; i < pos.size(); ++i) per_pos[i] += pos[i].get<long>();
    }
    EXPECT_GT(drafted, 0);
    auto after = metrics(s());
    auto diff = [&](const std::string& k) { return long(after[k] - before[k]); };
    EXPECT_EQ(diff("specula:spec_decode_num_drafts"), drafts);
    EXPECT_EQ(diff("specula:spec_decode_num_draft_tokens"), drafted);
    EXPECT_EQ(diff("specula:spec_decode_num_accepted_tokens"), accepted);
    EXPECT_EQ(diff("specula:prompt_tokens_total"), prompt);
    EXPECT_EQ(diff("specula:generation_tokens_total"), gen);
    EXPECT_EQ(diff("specula:request_success_total{finished_reason=\"length\"}"), 3);
    EXPECT_EQ(diff("specula:e2e_request_latency_seconds_count"), 3);
    for (int i = 0; i < 4; ++i) {
        const std::string k = "specula:spec_decode_num_accepted_tokens_per_pos{position=\"" +
                              std::to_string(i) + "\"}";
        ASSERT_TRUE(after.count(k)) << k;
        EXPECT_EQ(diff(k), per_pos[i]) << k;
    }
}

// Opens a raw connection, sends a long completion request and, with wait_for_reply, reads its
// first bytes (the response has started: the request holds a slot). Returns the socket; closing
// it hangs up.
int open_request(int port, int max_tokens, bool stream = true, const std::string& headers = "",
                 bool wait_for_reply = true) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw std::runtime_error("socket failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
        throw std::runtime_error("connect failed");
    const std::string body = json({{"prompt", "Once upon a time"},
                                   {"max_tokens", max_tokens},
                                   {"ignore_eos", true},
                                   {"stream", stream}})
                                 .dump();
    const std::string req =
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
        headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    if (write(fd, req.data(), req.size()) != ssize_t(req.size()))
        throw std::runtime_error("write failed");
    char buf[512];
    if (wait_for_reply && read(fd, buf, sizeof buf) <= 0) throw std::runtime_error("no response");
    return fd;
}

// Polls /metrics until `done` holds (at most ~10 s); returns the last sample.
template <class Pred>
std::map<std::string, double> wait_metrics(const ServerProcess& s, Pred done) {
    std::map<std::string, double> m;
    for (int i = 0; i < 400; ++i) {
        m = metrics(s);
        if (done(m)) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return m;
}

const std::string kAborts = "specula:request_success_total{finished_reason=\"abort\"}";

TEST_F(ServerTest, DisconnectCancelsGeneration) {
    // Node's fetch, the openai SDK and browsers ask for compression: a compressor must not swallow
    // the whitespace probe that notices the client is gone.
    for (const std::string headers : {"", "Accept-Encoding: gzip, deflate, br\r\n"})
        for (bool stream : {true, false}) {
            SCOPED_TRACE(std::string(stream ? "streaming" : "non-streaming") + " " + headers);
            auto before = metrics(s());
            close(open_request(s().port(), 2000, stream, headers));
            // The request ends as "abort" well before its 2000 tokens, and no slot stays busy.
            auto now = wait_metrics(s(), [&](auto& m) { return m[kAborts] > before[kAborts]; });
            EXPECT_EQ(now[kAborts] - before[kAborts], 1);
            EXPECT_LT(
                now["specula:generation_tokens_total"] - before["specula:generation_tokens_total"],
                2000);
            now = wait_metrics(s(), [](auto& m) { return m["specula:num_requests_running"] == 0; });
            EXPECT_EQ(now["specula:num_requests_running"], 0);
        }
}

// One slot: a second request queues, its status line not sent until it has a slot (so that a
// refusal from the queue can have its own); when its client leaves it leaves the queue at once,
// while the first keeps generating.
TEST(ServerQueue, AClientThatLeavesTheQueueIsDropped) {
    ServerProcess s({"-m", target_path(), "--parallel", "1", "-c", "4096"}, "queue");
    const int a = open_request(s.port(), 4000);
    const int b = open_request(s.port(), 4000, true, "", /*wait_for_reply=*/false);
    auto m = wait_metrics(s, [](auto& m) {
        return m["specula:num_requests_waiting"] == 1 && m["specula:num_requests_running"] == 1;
    });
    EXPECT_EQ(m["specula:num_requests_waiting"], 1);
    EXPECT_EQ(m["specula:num_requests_running"], 1);
    pollfd p{b, POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 200), 0) << "a queued request's reply waits for its slot";
    close(b);
    m = wait_metrics(s, [](auto& m) { return m["specula:num_requests_waiting"] == 0; });
    EXPECT_EQ(m["specula:num_requests_waiting"], 0);
    EXPECT_EQ(m[kAborts], 1);
    EXPECT_EQ(m["specula:num_requests_running"], 1) << "the first request is still generating";
    close(a);
    m = wait_metrics(s, [](auto& m) { return m[kAborts] == 2; });
    EXPECT_EQ(m[kAborts], 2);
    EXPECT_EQ(m["specula:num_requests_running"], 0);
}

// stories260K has no chat template: chat uses the documented "User: ...\nAssistant:" default,
// tokenized with BOS like `specula tokenize`.
TEST_F(ServerTest, ChatWithoutTemplateUsesThePlainDefault) {
    json r = completion(s(),
                        {{"messages",
                          {{{"role", "system"}, {"content", "Be kind."}},
                           {{"role", "user"}, {"content", "Hi there"}}}},
                         {"max_tokens", 3}},
                        true);
    const auto ids = tokenize_ids(target_path(), "System: Be kind.\nUser: Hi there\nAssistant:");
    EXPECT_GT(ids.size(), 5u);
    EXPECT_EQ(r["usage"]["prompt_tokens"].get<int>(), int(ids.size()));
}

TEST_F(ServerTest, ASecondServerCannotTakeTheSamePort) {
    auto [out, status] = shell(specula::test::specula_bin() + " serve -m '" + target_path() +
                               "' --port " + std::to_string(s().port()));
    EXPECT_NE(status, 0);
    EXPECT_NE(out.find("error: cannot listen on 127.0.0.1:" + std::to_string(s().port())),
              std::string::npos)
        << out;
}

// vLLM's --speculative-config with n-gram (prompt lookup) drafting: same greedy text.
TEST(ServerNgram, SpeculativeConfigNgramKeepsGreedyOutput) {
    ServerProcess s({"--model", target_path(), "--speculative-config",
                     R"({"method": "ngram", "num_speculative_tokens": 3})", "--parallel", "1"},
                    "ngram");
    const std::string prompt = "Lily saw a big red";
    json r = completion(s, {{"prompt", prompt}, {"max_tokens", 60}, {"temperature", 0}});
    EXPECT_EQ(r["choices"][0]["text"], specula_run_greedy(prompt, 60));
    const json& spec = r["usage"]["speculative"];
    EXPECT_GT(spec["drafted"].get<int>(), 0);
    EXPECT_LE(spec["accepted_per_pos"].size(), 3u);
}

// A model whose GGUF carries a Llama 3 chat template: the chat prompt is that template rendered by
// the Jinja engine (its text hand-written here, the template's own bos_token dropped), tokenized
// like `specula tokenize` (BOS added by the vocabulary).
TEST(ServerChatTemplate, Llama3VocabModelUsesItsTemplate) {
    const std::string model =
        shared_path("models/synthetic/rand-llama-llama3vocab-d64-l1-tied-Q8_0.gguf");
    ServerProcess s({"-m", model, "--parallel", "1", "-c", "256"}, "llama3");
    EXPECT_NE(s.log().find("chat jinja (the model's tokenizer.chat_template)"), std::string::npos)
        << s.log();
    json r = completion(s,
                        {{"messages", {{{"role", "user"}, {"content", " Hi! "}}}},
                         {"max_tokens", 2},
                         {"temperature", 0}},
                        true);
    const auto toks = tokenize_ids(model,
                                   "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
                                   "<|start_header_id|>assistant<|end_header_id|>\n\n");
    ASSERT_EQ(toks.size(), 12u);  // BOS + 11 template tokens
    EXPECT_EQ(toks[0], "128000");
    EXPECT_EQ(r["usage"]["prompt_tokens"].get<int>(), int(toks.size()));
}

// --draft auto (the adaptive draft length, carried per slot across requests): same greedy text.
TEST(ServerDraftAuto, AdaptiveDraftLengthKeepsGreedyOutput) {
    ServerProcess s(
        {"-m", target_path(), "-md", draft_path(), "--draft", "auto", "--parallel", "1"}, "auto");
    for (const std::string prompt : {"Lily saw a big red", "The little dog"}) {
        json r = completion(s, {{"prompt", prompt}, {"max_tokens", 60}, {"temperature", 0}});
        EXPECT_EQ(r["choices"][0]["text"], specula_run_greedy(prompt, 60)) << prompt;
        EXPECT_GT(r["usage"]["speculative"]["drafted"].get<int>(), 0);
    }
}

TEST(ServerApiKey, RequiresTheKeyOnV1) {
    ServerProcess s({"-m", target_path(), "--api-key", "sekret", "--parallel", "1"}, "key");
    const std::string body = R"({"prompt": "Tom", "max_tokens": 3})";
    expect_error(post(s, "/v1/completions", body), 401);
    expect_error(post(s, "/v1/completions", body, {{"Authorization", "Bearer wrong"}}), 401);
    Reply ok = post(s, "/v1/completions", body, {{"Authorization", "Bearer sekret"}});
    EXPECT_EQ(ok.status, 200);
    EXPECT_EQ(ok.body["usage"]["completion_tokens"], 3);
    auto health = s.client().Get("/health");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
}

TEST(ServerStartup, RefusesADraftWithAnotherVocabulary) {
    const std::string cmd =
        specula::test::specula_bin() + " serve -m '" + target_path() + "' -md '" +
        shared_path("models/synthetic/rand-llama-gpt2vocab-d64-l1-tied-F16.gguf") +
        "' --port 0 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_TRUE(p);
    std::string out;
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, k);
    const int status = pclose(p);
    EXPECT_NE(status, 0);
    EXPECT_NE(out.find("error: draft vocabulary mismatch"), std::string::npos) << out;
    EXPECT_EQ(out.find("listening"), std::string::npos) << out;
}

}  // namespace
