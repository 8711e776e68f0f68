// The KV pool of `specula serve` (server/serving/kv_pool.h): the context is never split over the
// slots; every request may use the whole context while the pool has room, admission waits for room
// (first come, first served), evicts idle slots' cached prefixes, and ends a request that waited
// past --kv-wait-timeout with an error naming the pool; /metrics reports it. Against stories260K
// with llama2xs as the draft model.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "server/raw_conn.h"
#include "server/server_process.h"
#include "server/serving/kv_pool.h"
#include "test_util.h"

namespace {

using json = nlohmann::json;
using specula::Admission;
using specula::PoolSlot;
using specula::test::server_draft_path;
using specula::test::server_target_path;
using specula::test::ServerProcess;

TEST(KvPool, AdmissionEvictsIdleSlotsLeastRecentlyUsedFirst) {
    // A busy slot (40), two idle ones holding prefixes (30 used at 1, 20 at 2), the target (10).
    const std::vector<PoolSlot> slots = {
        {true, 40, 0, 5}, {false, 0, 30, 1}, {false, 0, 20, 2}, {false, 0, 10, 3}};
    EXPECT_EQ(specula::pool_used(slots), 100);
    // The target's own prefix becomes part of the reservation: 40 + 30 + 20 + 10 fits 100.
    Admission a = specula::plan_admission(slots, 3, 10, 100);
    EXPECT_TRUE(a.fits);
    EXPECT_TRUE(a.evict.empty());
    // 50 needs both idle prefixes gone, the older first.
    a = specula::plan_admission(slots, 3, 50, 100);
    ASSERT_TRUE(a.fits);
    EXPECT_EQ(a.evict, (std::vector<int>{1, 2}));
    EXPECT_EQ(a.free_after, 10);
    a = specula::plan_admission(slots, 3, 35, 100);
    ASSERT_TRUE(a.fits);
    EXPECT_EQ(a.evict, (std::vector<int>{1}));
    // More than the busy slot leaves: it waits, and nothing is evicted.
    a = specula::plan_admission(slots, 3, 61, 100);
    EXPECT_FALSE(a.fits);
    EXPECT_TRUE(a.evict.empty());
    EXPECT_EQ(a.free_after, 0);
}

TEST(KvPool, ReservationIsPromptPlusMaxTokensPlusAVerifyPassAtMostTheContext) {
    EXPECT_EQ(specula::reservation(10, 20, 5, 100), 35);
    EXPECT_EQ(specula::reservation(10, 0, 5, 100), 100);   // no max_tokens: the whole context
    EXPECT_EQ(specula::reservation(90, 20, 5, 100), 100);  // never past the context
    // Admission reserves at most `ahead` generated positions; the scheduler grows it as it goes.
    EXPECT_EQ(specula::reservation(10, 0, 5, 100, 30), 45);
    EXPECT_EQ(specula::reservation(10, 20, 5, 100, 30), 35);
    EXPECT_EQ(specula::reservation(80, 0, 5, 100, 30), 100);
    EXPECT_EQ(specula::reserve_ahead(512), 64);  // an eighth of the context, at most 256
    EXPECT_EQ(specula::reserve_ahead(32768), 256);
}

using Reply = specula::test::JsonReply;

Reply post(const ServerProcess& s, const json& body) {
    return specula::test::post_json(s, "/v1/completions", body);
}

// The specula:kv_pool_* lines of /metrics.
std::map<std::string, double> pool_metrics(const ServerProcess& s) {
    auto res = s.client().Get("/metrics");
    if (!res) throw std::runtime_error("no /metrics");
    std::map<std::string, double> out;
    std::istringstream in(res->body);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("specula:kv_pool_", 0) != 0 && line.rfind("vllm:kv_cache_usage", 0) != 0 &&
            line.rfind("vllm:prefix_cache_", 0) != 0 &&
            line.rfind("vllm:num_preemptions", 0) != 0 && line.rfind("vllm:num_requests_", 0) != 0)
            continue;
        const size_t sp = line.rfind(' ');
        std::string name = line.substr(0, sp);
        if (const size_t b = name.find('{'); b != std::string::npos) name.resize(b);
        out[name] = std::stod(line.substr(sp + 1));
    }
    return out;
}

std::string words(int n) {
    std::string s = "Once upon a time";
    for (int i = 0; i < n; ++i) s += i % 2 ? " the cat" : " a dog";
    return s;
}

// The README's server line: -c 512 with --parallel 4. A request may use the whole 512 positions
// (split over the slots it would get 128 and be refused), and four at once all finish: those
// whose reservation does not fit beside the running ones wait for room.
TEST(KvPool, WholeContextPerRequestAndConcurrentRequestsWaitForRoom) {
    ServerProcess s(
        {"-m", server_target_path(), "-md", server_draft_path(), "-c", "512", "--parallel", "4"},
        "kvpool");
    EXPECT_NE(s.log().find("4 slots share a KV pool of 512 positions; one request may use up to "
                           "512"),
              std::string::npos)
        << s.log();
    Reply big = post(s, {{"prompt", words(90)}, {"max_tokens", 150}, {"temperature", 0}});
    ASSERT_EQ(big.status, 200) << big.text;
    EXPECT_GT(big.body["usage"]["prompt_tokens"].get<int>(), 250) << big.text;
    EXPECT_EQ(big.body["usage"]["completion_tokens"], 150) << big.text;

    // The same long prompt again finds its prefix in the slot: vLLM's prefix cache counters.
    const auto m0 = pool_metrics(s);
    Reply again = post(s, {{"prompt", words(90)}, {"max_tokens", 4}, {"temperature", 0}});
    ASSERT_EQ(again.status, 200) << again.text;
    const int n_prompt = again.body["usage"]["prompt_tokens"].get<int>();
    const auto m1 = pool_metrics(s);
    EXPECT_EQ(m1.at("vllm:prefix_cache_queries_total") - m0.at("vllm:prefix_cache_queries_total"),
              n_prompt);
    EXPECT_EQ(m1.at("vllm:prefix_cache_hits_total") - m0.at("vllm:prefix_cache_hits_total"),
              n_prompt - 1)
        << "all but the last prompt token";

    // Four requests of ~220 positions each: all start (each reserves 64 generated positions
    // ahead), and as they grow past what the pool holds the youngest wait (preempted) for room.
    std::vector<Reply> replies(4);
    std::vector<std::thread> ts;
    for (int i = 0; i < 4; ++i)
        ts.emplace_back([&, i] {
            replies[size_t(i)] = post(s, {{"prompt", "Once upon a time"},
                                          {"max_tokens", 200},
                                          {"ignore_eos", true},
                                          {"temperature", 0},
                                          {"seed", i}});
        });
    for (auto& t : ts) t.join();
    for (const Reply& r : replies) {
        ASSERT_EQ(r.status, 200) << r.text;
        EXPECT_EQ(r.body["usage"]["completion_tokens"], 200) << r.text;
    }
    const auto m = pool_metrics(s);
    EXPECT_EQ(m.at("specula:kv_pool_positions"), 512);
    EXPECT_EQ(m.at("specula:kv_pool_timeouts_total"), 0);
    EXPECT_EQ(m.at("specula:kv_pool_waiting_requests"), 0);
    // Idle slots keep their prefixes: within the pool, counted apart (evictable), and not in
    // vLLM's usage gauge.
    EXPECT_EQ(m.at("specula:kv_pool_used_positions"), 0);
    EXPECT_LE(m.at("specula:kv_pool_cached_positions"), 512);
    EXPECT_GT(m.at("specula:kv_pool_cached_positions"), 0);
    EXPECT_EQ(m.at("vllm:kv_cache_usage_perc"), 0);
}

// A request that cannot get room within --kv-wait-timeout is answered 503 with Retry-After and
// an error naming the pool (the status line waits for a slot), streamed or not, counted in
// /metrics; the server goes on serving.
TEST(KvPool, WaitPastTheTimeoutEndsWithAnErrorNamingThePool) {
    ServerProcess s({"-m", server_draft_path(), "--max-model-len", "8192", "--kv-pool", "8192",
                     "--parallel", "2", "--kv-wait-timeout", "0.2"},
                    "kvpoolwait");
    // A long generation on a long prompt (3,005 tokens) holds most of the pool: its prompt and
    // what it generates (streamed, so it is running once data comes).
    std::atomic<bool> started{false}, stop{false};
    std::thread hog([&] {
        httplib::Client c("127.0.0.1", s.port());
        c.set_read_timeout(60, 0);
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/completions";
        req.body = json{
            {"prompt", words(1000)},
            {"max_tokens", 5000},
            {"ignore_eos", true},
            {"stream", true},
            {"temperature",
             0}}.dump();
        req.set_header("Content-Type", "application/json");
        req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
            started = true;
            return !stop.load();  // false: the client leaves, cancelling the request
        };
        c.send(req);
    });
    for (int i = 0; i < 2000 && !started; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(started);
    // Over 3,200 positions are reserved: a prompt of ~5,400 tokens that shares none of the hog's
    // does not fit the 8192 beside them (a waiting request never takes a running one's room).
    const std::string other = "Lily. " + words(1800);
    Reply r, streamed;
    std::thread t1([&] { r = post(s, {{"prompt", other}, {"max_tokens", 8}}); });
    std::thread t2([&] {
        streamed = post(s, {{"prompt", other}, {"max_tokens", 8}, {"stream", true}});
    });
    t1.join();
    t2.join();
    stop = true;
    hog.join();
    for (const Reply* x : {&r, &streamed}) {
        EXPECT_EQ(x->status, 503) << x->text;
        EXPECT_EQ(x->body["error"]["code"], "kv_pool_full") << x->text;
        EXPECT_NE(x->text.find("KV pool stayed full for 0.2 s"), std::string::npos) << x->text;
        EXPECT_NE(x->text.find("--kv-pool"), std::string::npos) << x->text;
        const auto retry = x->headers.find("Retry-After");
        ASSERT_NE(retry, x->headers.end()) << x->text;
        EXPECT_EQ(retry->second, "1");
    }
    EXPECT_EQ(pool_metrics(s).at("specula:kv_pool_timeouts_total"), 2);
    Reply after = post(s, {{"prompt", "Once upon a time"}, {"max_tokens", 8}});
    EXPECT_EQ(after.status, 200) << after.text;
}

// More long generations than the pool holds at once (a 512-position context each, a pool of
// 800): they all run, the youngest giving its slot and KV back whenever an older one's
// reservation must grow (vLLM's preemption) and resuming later where it stopped, its rows copied
// back from --cache-ram's pool or (--cache-ram 0) evaluated again; each greedy text is the one
// the request gets alone. With a draft model, and with drafters that read the target's own rows:
// a hybrid model's MTP head (recurrent layers: no rows to copy back) and an EAGLE-3 head.
TEST(KvPool, PreemptedRequestsResumeWithTheirOwnGreedyOutput) {
    const std::vector<std::string> prompts = {"Once upon a time", "Lily saw a big red",
                                              "The little dog ran"};
    const std::string data = std::string(SPECULA_SOURCE_DIR) + "/tests/data/";
    const std::vector<std::vector<std::string>> setups = {
        {"-m", server_target_path(), "-md", server_draft_path(), "--cache-ram", "8192"},
        {"-m", server_target_path(), "-md", server_draft_path(), "--cache-ram", "0"},
        {"-m", data + "arch/rand-qwen35-mtp1-tok512-d128-l4-F16.gguf", "--spec-type", "mtp",
         "--draft", "2"},
        {"-m", server_target_path(), "--spec-type", "eagle3", "-md",
         data + "eagle3/stories260K-eagle3.gguf", "--draft", "3", "--cache-ram", "0"}};
    for (const auto& setup : setups) {
        std::vector<std::string> args = {"-c", "512", "--parallel", "3", "--kv-pool", "800"};
        args.insert(args.end(), setup.begin(), setup.end());
        SCOPED_TRACE(setup[1] + " " + setup[2] + " " + setup[3] + " " + setup.back());
        ServerProcess s(args, "kvpreempt");
        auto body = [](const std::string& p) {
            return json{{"prompt", p}, {"ignore_eos", true}, {"temperature", 0}};
        };
        std::vector<Reply> alone;
        for (const std::string& p : prompts) alone.push_back(post(s, body(p)));
        EXPECT_EQ(pool_metrics(s).at("vllm:num_preemptions_total"), 0);
        std::vector<Reply> together(prompts.size());
        std::vector<std::thread> ts;
        for (size_t i = 0; i < prompts.size(); ++i)
            ts.emplace_back([&, i] { together[i] = post(s, body(prompts[i])); });
        for (auto& t : ts) t.join();
        for (size_t i = 0; i < prompts.size(); ++i) {
            ASSERT_EQ(alone[i].status, 200) << alone[i].text;
            ASSERT_EQ(together[i].status, 200) << together[i].text;
            const json& a = alone[i].body;
            const json& b = together[i].body;
            EXPECT_EQ(a["choices"][0]["finish_reason"], "length");
            EXPECT_GT(a["usage"]["completion_tokens"].get<int>(), 450) << alone[i].text;
            EXPECT_EQ(b["usage"]["completion_tokens"], a["usage"]["completion_tokens"]);
            EXPECT_EQ(b["choices"][0]["text"], a["choices"][0]["text"]) << prompts[i];
            EXPECT_EQ(b["choices"][0]["finish_reason"], "length");
        }
        const auto m = pool_metrics(s);
        EXPECT_GT(m.at("vllm:num_preemptions_total"), 0);
        EXPECT_EQ(m.at("specula:kv_pool_used_positions"), 0);
        EXPECT_EQ(m.at("specula:kv_pool_waiting_requests"), 0);
        EXPECT_EQ(m.at("specula:kv_pool_timeouts_total"), 0);
    }
}

// Streams that outgrow the pool, half of whose clients leave part-way (running, or preempted
// and waiting to resume): the others finish, and nothing stays counted afterwards (the pool's
// reservations, vLLM's running and waiting gauges, which count a preempted request as waiting).
TEST(KvPool, ClientsLeavingWhilePreemptedLeaveNothingCounted) {
    ServerProcess s({"-m", server_draft_path(), "-c", "512", "--parallel", "6"}, "kvleave");
    std::vector<std::unique_ptr<specula::test::RawConn>> conns;
    for (int i = 0; i < 6; ++i) {
        const std::string body = json{
            {"prompt", "Once upon a time " + std::to_string(i)},
            {"ignore_eos", true},
            {"temperature", 0},
            {"stream", true}}.dump();
        conns.push_back(std::make_unique<specula::test::RawConn>(s.port()));
        ASSERT_TRUE(conns.back()->send_all(
            "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            "Content-Type: application/json\r\nContent-Length: " +
            std::to_string(body.size()) + "\r\n\r\n" + body));
    }
    for (int i = 0; i < 6; i += 2) {  // a few chunks, then these clients leave
        (void)conns[size_t(i)]->read_some(2.0);
        std::this_thread::sleep_for(std::chrono::milliseconds(20 * i));
        conns[size_t(i)].reset();
    }
    for (int i = 1; i < 6; i += 2) {
        const std::string got = conns[size_t(i)]->read_until_close(120);
        EXPECT_NE(got.find("data: [DONE]"), std::string::npos) << got.substr(0, 300);
    }
    auto m = pool_metrics(s);
    for (int i = 0; i < 100 && m.at("vllm:num_requests_running") > 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        m = pool_metrics(s);
    }
    EXPECT_GT(m.at("vllm:num_preemptions_total"), 0);
    EXPECT_EQ(m.at("vllm:num_requests_running"), 0);
    EXPECT_EQ(m.at("vllm:num_requests_waiting"), 0);
    EXPECT_EQ(m.at("specula:kv_pool_used_positions"), 0);
    EXPECT_EQ(m.at("specula:kv_pool_waiting_requests"), 0);
    Reply after = post(s, {{"prompt", "Once upon a time"}, {"max_tokens", 8}});
    EXPECT_EQ(after.status, 200) << after.text;
}

// vLLM's default --max-num-seqs 256 with a per-sequence --max-model-len: it starts (the pool,
// not 256 whole caches, is planned) and serves a request of the full length.
TEST(KvPool, VllmMaxNumSeqs256ServesFullLengthRequests) {
    ServerProcess s({server_target_path(), "--max-num-seqs", "256", "--max-model-len", "512"},
                    "kvpool256");
    Reply r = post(s, {{"prompt", "Once upon a time"}, {"max_tokens", 500}, {"ignore_eos", true}});
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["usage"]["completion_tokens"], 500) << r.text;
    // Past the context: refused naming both numbers.
    Reply over = post(s, {{"prompt", "Once upon a time"}, {"max_tokens", 600}});
    EXPECT_EQ(over.status, 400);
    EXPECT_EQ(over.body["error"]["code"], "context_length_exceeded") << over.text;
    // A pool smaller than one sequence is refused at startup, naming the flags.
    EXPECT_THROW(
        ServerProcess({server_target_path(), "--parallel", "2", "-c", "512", "--kv-pool", "100"},
                      "kvpoolsmall"),
        std::runtime_error);
}

// A size as the memory plan prints it ("40.00 MiB") in bytes.
double plan_bytes(const std::string& number, const std::string& unit) {
    const double v = std::stod(number);
    if (unit == "KiB") return v * 1024;
    if (unit == "MiB") return v * 1024 * 1024;
    if (unit == "GiB") return v * 1024 * 1024 * 1024;
    return v;  // B
}

// vLLM's sizing (--max-model-len, --gpu-memory-utilization): the pool takes what the fraction of
// the memory leaves after the rest of the plan, where the rest counts the weights, passes and
// logits once, not every slot's whole cache. With --memory-budget as the available memory, the
// planned total reaches the budget less at most one position's rows (256 whole contexts would
// be 640 MiB: the pool is the budget's, not the cap's).
TEST(KvPool, MemoryFractionPoolFillsWhatTheRestLeaves) {
    ServerProcess s({server_target_path(), "--max-num-seqs", "256", "--max-model-len", "4096",
                     "--memory-budget", "400", "--gpu-memory-utilization", "1", "--cache-ram", "0"},
                    "kvpoolfraction");
    const std::string log = s.log();
    const std::string size = R"(([0-9.]+) (B|KiB|MiB|GiB))";
    std::smatch pool, total;
    ASSERT_TRUE(std::regex_search(log, pool, std::regex("KV pool ([0-9]+) positions " + size)))
        << log;
    ASSERT_TRUE(std::regex_search(log, total, std::regex("= " + size + " of " + size))) << log;
    const double positions = std::stod(pool[1]), kv = plan_bytes(pool[2], pool[3]);
    const double planned = plan_bytes(total[1], total[2]), budget = plan_bytes(total[3], total[4]);
    EXPECT_EQ(budget, 400.0 * 1024 * 1024) << log;
    EXPECT_LT(positions, 256.0 * 4096) << log;  // not the cap
    EXPECT_GE(positions, 4096) << log;
    const double per_position = kv / positions, printing = 0.01 * 1024 * 1024;
    EXPECT_LE(planned, budget + printing) << log;
    EXPECT_GT(planned, budget - 2 * per_position - 2 * printing) << log;
    Reply r = post(s, {{"prompt", "Once upon a time"}, {"max_tokens", 8}});
    EXPECT_EQ(r.status, 200) << r.text;
}

// A launch line in vLLM's words with no context flag (`serve MODEL --max-num-seqs N`) sizes as
// vLLM does: each request up to the training context, the pool from the memory fraction; with
// llama-server's --parallel the pool is -c (default: the context). Both spellings at once with
// different counts are refused.
TEST(KvPool, VllmLaunchLineWithoutAContextFlagSizesAsVllm) {
    {
        ServerProcess s({server_target_path(), "--max-num-seqs", "4", "--memory-budget", "400"},
                        "kvpoolvllmline");
        EXPECT_NE(s.log().find("4 slots share a KV pool of 2048 positions; one request may use up "
                               "to 512 (--gpu-memory-utilization"),
                  std::string::npos)
            << s.log();
    }
    {
        ServerProcess s({"-m", server_target_path(), "--parallel", "4"}, "kvpoolllamaline");
        EXPECT_NE(s.log().find("4 slots share a KV pool of 512 positions; one request may use up "
                               "to 512 (-c"),
                  std::string::npos)
            << s.log();
    }
    EXPECT_THROW(
        ServerProcess({"-m", server_target_path(), "--parallel", "2", "--max-num-seqs", "3"},
                      "kvpoolboth"),
        std::runtime_error);
}

}  // namespace
