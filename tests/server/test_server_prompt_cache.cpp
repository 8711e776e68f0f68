// serve --cache-ram (server/serving/prompt_cache.h): with one slot, request A, then two others that
// take the slot, then A again: A's KV prefix comes back from the host-RAM pool (target and draft),
// so its prompt is not evaluated again (timings.prompt_n 1, usage cached_tokens all but one), and
// the text equals a cold run's; /metrics counts the hit. Without the pool (--cache-ram 0) the same
// A is evaluated whole. A pool too small for two entries evicts A (least recently used): a miss.
// The pool itself: an older turn of a conversation is replaced by the newer, LRU eviction within
// the bound, an entry over the bound is not kept.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_process.h"
#include "server/server_process.h"
#include "server/serving/prompt_cache.h"
#include "test_util.h"

namespace {

using json = nlohmann::json;
using specula::test::ServerProcess;

json complete(const ServerProcess& s, const std::string& prompt) {
    auto res = s.client().Post(
        "/v1/completions", json{{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}}.dump(),
        "application/json");
    if (!res || res->status != 200)
        throw std::runtime_error("completion failed: " + (res ? res->body : std::string("-")));
    return json::parse(res->body);
}

double metric(const ServerProcess& s, const std::string& name) {
    auto res = s.client().Get("/metrics");
    if (!res) return -1;
    const size_t p = res->body.find("\n" + name + " ");
    return p == std::string::npos ? -1 : std::stod(res->body.substr(p + name.size() + 2));
}

std::string repeat(const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
}

const std::string kA = repeat("Once upon a time there was a little girl named Lily. ", 8);
const std::vector<std::string> kOthers = {"Tom had a big red ball and he", "The sun was hot and"};

struct Returning {
    json first, again;
};

// A, the others (each takes the one slot), then A again.
Returning returning_a(const ServerProcess& s) {
    Returning r;
    r.first = complete(s, kA);
    for (const auto& o : kOthers) complete(s, o);
    r.again = complete(s, kA);
    return r;
}

std::vector<std::string> server_args(const std::string& cache_ram, bool draft) {
    std::vector<std::string> a = {"-m",          specula::test::server_target_path(),
                                  "-c",          "256",
                                  "-t",          "1",
                                  "--parallel",  "1",
                                  "--cache-ram", cache_ram};
    if (draft) a.insert(a.end(), {"-md", specula::test::server_draft_path(), "--draft", "3"});
    return a;
}

TEST(ServerPromptCache, AReturningPromptIsRestoredNotRecomputed) {
    // The RAM pool alone: A's prefix block would serve A again in place, before the pool
    // (test_server_prefix_sharing: the pool feeds a block when there is none).
    std::vector<std::string> args = server_args("64", true);
    args.insert(args.end(), {"--prefix-min-tokens", "0"});
    ServerProcess cached(args, "cache-ram");
    const Returning r = returning_a(cached);
    const int n_prompt = r.again["usage"]["prompt_tokens"].get<int>();
    ASSERT_GT(n_prompt, 100);
    EXPECT_EQ(r.first["timings"]["prompt_n"].get<int>(), n_prompt);
    EXPECT_EQ(r.again["timings"]["prompt_n"].get<int>(), 1) << r.again.dump();
    EXPECT_EQ(r.again["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), n_prompt - 1);
    EXPECT_EQ(r.again["choices"][0]["text"], r.first["choices"][0]["text"]);
    EXPECT_EQ(metric(cached, "specula:prompt_cache_hits_total"), 1);
    EXPECT_GT(metric(cached, "specula:prompt_cache_bytes"), 0);
    EXPECT_EQ(metric(cached, "specula:prompt_cache_max_bytes"), 64.0 * 1024 * 1024);

    // The same sequence without the pool (nor shared prefix blocks, which would keep A's
    // prefix too: test_server_prefix_sharing): A is evaluated again, to the same text.
    std::vector<std::string> cold_args = server_args("0", true);
    cold_args.insert(cold_args.end(), {"--prefix-min-tokens", "0"});
    ServerProcess cold(cold_args, "cache-ram-off");
    const Returning c = returning_a(cold);
    EXPECT_GT(c.again["timings"]["prompt_n"].get<int>(), n_prompt - 5) << c.again.dump();
    EXPECT_EQ(c.again["choices"][0]["text"], r.again["choices"][0]["text"]);
    EXPECT_EQ(metric(cold, "specula:prompt_cache_hits_total"), -1) << "no pool, no metric";
}

TEST(ServerPromptCache, TheLeastRecentlyUsedEntryIsEvicted) {
    // stories260K keeps 1280 bytes per position with f32 caches: a pool of 1 MiB holds one
    // ~460-token entry, so the next one pushes A's out.
    const std::string long_a = repeat("Once upon a time there was a little girl named Lily. ", 33);
    ServerProcess s(
        {"-m", specula::test::server_target_path(), "--max-model-len", "512", "-t", "1",
         "--parallel", "1", "--cache-ram", "1", "--cache-type-k", "f32", "--cache-type-v", "f32",
         "--prefix-min-tokens", "0"},  // the RAM pool alone (a prefix block would keep A)
        "cache-ram-lru");
    const json first = complete(s, long_a);
    ASSERT_GT(first["usage"]["prompt_tokens"].get<int>(), 400);
    complete(s, repeat("Tom had a big red ball and he liked to throw it. ", 24));
    complete(s, repeat("The sun was hot and the sky was blue all day. ", 24));
    const json again = complete(s, long_a);
    EXPECT_GT(again["timings"]["prompt_n"].get<int>(), 400) << "A should have been evicted";
    EXPECT_GE(metric(s, "specula:prompt_cache_evictions_total"), 1);
    EXPECT_EQ(metric(s, "specula:prompt_cache_hits_total"), 0);
    EXPECT_EQ(again["choices"][0]["text"], first["choices"][0]["text"]);
}

// An explicit --cache-ram is counted whole in the memory plan: one larger than the memory is
// refused before the server listens, naming it, unless --no-memory-check.
TEST(ServerPromptCache, ACacheLargerThanTheMemoryIsRefused) {
    const auto r = specula::test::run_specula({"serve", "-m", specula::test::server_target_path(),
                                               "--port", "0", "--cache-ram", "100000000"});
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find("error: not enough memory for this run"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("+ prompt cache 95.37 TiB"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("a smaller --cache-ram"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("listening"), std::string::npos) << r.err;
    // --no-memory-check starts anyway (the pool is a bound, nothing is allocated up front).
    ServerProcess anyway({"-m", specula::test::server_target_path(), "-t", "1", "--cache-ram",
                          "100000000", "--no-memory-check"},
                         "cache-ram-anyway");
    EXPECT_NE(anyway.log().find("warning: the memory plan exceeds the available memory"),
              std::string::npos)
        << anyway.log();
    EXPECT_EQ(complete(anyway, "Lily")["usage"]["completion_tokens"], 12);
    const auto bad = specula::test::run_specula(
        {"serve", "-m", "/nonexistent.gguf", "--port", "0", "--cache-ram", "-5"});
    EXPECT_EQ(bad.status, 1);
    EXPECT_NE(bad.err.find("--cache-ram must be -1 (what the memory plan leaves), 0 (off) or a "
                           "size in MiB, got -5"),
              std::string::npos)
        << bad.err;
}

specula::PromptCacheEntry entry(std::vector<specula::token_id> tokens, size_t kv_bytes) {
    specula::PromptCacheEntry e;
    e.target.tokens = std::move(tokens);
    e.target.k.assign(kv_bytes / 2, 1);
    e.target.v.assign(kv_bytes / 2, 2);
    return e;
}

TEST(PromptCachePool, NewerTurnsReplaceOlderAndTheBoundHolds) {
    specula::PromptCache pool(1000);
    pool.put(entry({1, 2, 3}, 400));
    pool.put(entry({1, 2, 3, 4, 5}, 400));  // the same conversation, a turn later: replaces
    EXPECT_EQ(pool.stats().entries, 1);
    pool.put(entry({7, 8}, 400));
    pool.put(entry({9, 9}, 400));  // 3 x (400 + tokens) > 1000: the oldest ({1..5}) goes
    EXPECT_EQ(pool.stats().entries, 2);
    EXPECT_EQ(pool.stats().evictions, 1);
    EXPECT_LE(pool.stats().bytes, 1000u);
    pool.put(entry({5, 5}, 2000));  // over the bound: not kept
    EXPECT_EQ(pool.stats().entries, 2);
    // A hit needs a longer prefix than the slot already has; it takes the entry out.
    const std::vector<specula::token_id> prompt = {7, 8, 4, 4};
    EXPECT_FALSE(pool.take(prompt, 2));
    auto hit = pool.take(prompt, 1);
    ASSERT_TRUE(hit);
    EXPECT_EQ(hit->target.tokens, (std::vector<specula::token_id>{7, 8}));
    EXPECT_EQ(pool.stats().entries, 1);
    EXPECT_EQ(pool.stats().hits, 1);
    EXPECT_EQ(pool.stats().misses, 1);
}

}  // namespace
