// End-to-end tests of the `specula` binary's memory: the plan it prints (weights, KV caches,
// pass buffers, logits) against MemAvailable, the refusal of caches that do not fit together, a
// long prompt's peak RSS within the plan, and -ub splitting the passes without changing the text.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_checks.h"
#include "cli_process.h"
#include "test_util.h"

namespace {

using specula::test::describe;
using specula::test::kStoriesRel;
using specula::test::run_specula;
using specula::test::shared_path;

// "19.32 MiB ..." (common/format.h's format_bytes) as bytes; 0 when it is not one.
double parse_bytes(const std::string& s) {
    std::istringstream in(s);
    double v = 0;
    std::string unit;
    if (!(in >> v >> unit)) return 0;
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    for (int u = 0; u < 5; ++u, v *= 1024)
        if (unit == units[u]) return v;
    return 0;
}

double mem_available() {
    std::ifstream f("/proc/meminfo");
    std::string key, unit;
    double kib = 0;
    while (f >> key >> kib >> unit)
        if (key == "MemAvailable:") return kib * 1024;
    return 0;
}

// The memory plan: weights, target KV, draft KV and their total against MemAvailable on one
// stderr line; a target and a draft cache that each fit but not together are refused before
// anything is allocated, naming both.
TEST(Cli, MemoryPlan) {
    const std::string model = shared_path(kStoriesRel);
    const std::string draft = shared_path("models/tinystories/llama2xs.gguf");
    const auto r =
        run_specula({"run", "-m", model, "-md", draft, "-n", "4", "-c", "256", "-t", "1"});
    ASSERT_EQ(r.status, 0) << describe(r);
    // 5 layers x 256 positions x 32 values x (2 + 2) bytes (F16 K and V) = 160 KiB each.
    // Then each model's pass buffers (with one thread's attention scratch: (64 x 256 scores +
    // 64 x 8 rows + 64 x 8 queries) floats = 68 KiB) and the kept logits, and before them what
    // the process holds besides the weights (code, metadata, tokenizers).
    EXPECT_NE(r.err.find("memory: runtime "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(" + weights 1.12 MiB + KV 160.00 KiB + draft weights 1.19 MiB + "
                         "draft KV 160.00 KiB + passes "),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(" + logits "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(" available"), std::string::npos) << r.err;

    const double avail = mem_available();
    ASSERT_GT(avail, 0);
    // Each cache takes 0.6 of the available memory (640 bytes per position with F16, 64 more of
    // scratch with one thread).
    const long n_ctx = long(0.6 * avail / 704);
    const auto big = run_specula(
        {"run", "-m", model, "-md", draft, "-n", "4", "-t", "1", "-c", std::to_string(n_ctx)});
    EXPECT_EQ(big.status, 1) << describe(big);
    EXPECT_EQ(big.out, "");
    EXPECT_NE(big.err.find("error: not enough memory for this run (runtime "), std::string::npos)
        << big.err;
    EXPECT_NE(big.err.find(" + weights 1.12 MiB + KV "), std::string::npos) << big.err;
    EXPECT_NE(big.err.find("+ draft KV "), std::string::npos) << big.err;
    EXPECT_NE(big.err.find("use a smaller -c, -ctk q8_0 -ctv q8_0"), std::string::npos) << big.err;

    // serve's slots share one KV pool: with -c the pool is the context (llama-server's unified
    // cache), so a context that does not fit `run` does not fit two slots either, and the
    // refusal, naming the pool, comes before the server listens.
    const auto two = run_specula({"serve", "-m", model, "-md", draft, "-t", "1", "--parallel", "2",
                                  "--port", "0", "-c", std::to_string(n_ctx)});
    EXPECT_EQ(two.status, 1) << describe(two);
    EXPECT_NE(two.err.find("serve: memory: runtime "), std::string::npos) << two.err;
    EXPECT_NE(
        two.err.find(" + weights 1.12 MiB + KV pool " + std::to_string(n_ctx) + " positions "),
        std::string::npos)
        << two.err;
    EXPECT_NE(two.err.find("error: not enough memory for this run (runtime "), std::string::npos)
        << two.err;
    EXPECT_NE(two.err.find("a smaller --kv-pool"), std::string::npos) << two.err;
    // vLLM's --max-model-len: the pool takes --gpu-memory-utilization of the memory, which
    // cannot hold one such sequence: refused naming the flags.
    const auto vllm = run_specula({"serve", "-m", model, "-md", draft, "-t", "1", "--parallel", "2",
                                   "--port", "0", "--max-model-len", std::to_string(n_ctx)});
    EXPECT_EQ(vllm.status, 1) << describe(vllm);
    EXPECT_NE(vllm.err.find("--gpu-memory-utilization 0.9"), std::string::npos) << vllm.err;
    EXPECT_NE(vllm.err.find("cannot hold one sequence"), std::string::npos) << vllm.err;

    // One slot keeps a plain cache of the whole context: a --kv-pool that cannot hold it is
    // refused all the same (it was ignored), before the server listens.
    const std::string stories = shared_path(kStoriesRel);
    const auto one = run_specula(
        {"serve", "-m", stories, "-t", "1", "--port", "0", "-c", "512", "--kv-pool", "256"});
    EXPECT_EQ(one.status, 1) << describe(one);
    EXPECT_NE(one.err.find("the KV pool of 256 positions (--kv-pool 256) cannot hold one "
                           "sequence of the context, 512 positions"),
              std::string::npos)
        << one.err;
    EXPECT_EQ(one.err.find("listening"), std::string::npos) << one.err;
}

// A long prompt on a 128k vocabulary (Llama 3's) peaks within 10% of the memory plan `run`
// prints: the prompt keeps one logits row, its passes are n_ubatch rows, and the plan counts
// what the process holds besides the weights. The same with the model as its own draft: the
// draft's prefill keeps one row too. (Before, a 6k-token prompt kept 6k rows of 128k logits:
// 3 GB against a plan of 18 MiB.)
TEST(Cli, LongPromptPeaksWithinThePlan) {
    const std::string model =
        shared_path("models/synthetic/rand-llama-llama3vocab-d64-l1-tied-Q8_0.gguf");
    // ~6k tokens of varied words.
    std::string text;
    const char* words[] = {"system", "tool",   "file",   "path",    "read",
                           "write",  "search", "agent",  "request", "context",
                           "cache",  "prefix", "output", "value",   "string"};
    for (int i = 0; text.size() < 30000; ++i) {
        text += words[(i * 7 + i / 5) % 15];
        text += i % 11 == 10 ? ". " : " ";
    }
    const std::string prompt = testing::TempDir() + "long_prompt.txt";
    {
        std::ofstream f(prompt);
        f << text;
    }
    for (const bool with_draft : {false, true}) {
        std::vector<std::string> args = {"run", "-m",   model,    "-f", prompt, "-n", "4",
                                         "-c",  "8192", "--temp", "0",  "-t",   "2"};
        if (with_draft) args.insert(args.end(), {"-md", model, "--draft", "4"});
        const auto r = run_specula(args);
        ASSERT_EQ(r.status, 0) << describe(r);
        const size_t at = r.err.find("memory: ");
        ASSERT_NE(at, std::string::npos) << r.err;
        const size_t eq = r.err.find(" = ", at);
        ASSERT_NE(eq, std::string::npos) << r.err;
        const double plan = parse_bytes(r.err.substr(eq + 3));
        ASSERT_GT(plan, 0) << r.err;
        const size_t np = r.err.find("prompt: ");
        ASSERT_NE(np, std::string::npos) << r.err;
        EXPECT_GT(std::atoi(r.err.c_str() + np + 8), 4000) << r.err;
        EXPECT_LE(double(r.max_rss_kib) * 1024, 1.10 * plan)
            << (with_draft ? "with -md: " : "") << "peak RSS " << r.max_rss_kib
            << " KiB against the plan: " << r.err;
    }
}

// -ub (llama.cpp's --ubatch-size) splits a prompt into passes of that many tokens: the output is
// the same (batch invariance), with and without a draft model, and the memory plan's pass
// buffers shrink with it; -ub 0 is an error naming the flag.
TEST(Cli, UbatchSplitsThePassesNotTheOutput) {
    const std::string model = shared_path(kStoriesRel);
    std::string prompt;
    for (int i = 0; i < 12; ++i) prompt += "Once upon a time there was a little girl named Lily. ";
    const auto passes = [](const std::string& err) {
        const size_t at = err.find(" + passes ");
        return at == std::string::npos ? -1.0 : parse_bytes(err.substr(at + 10));
    };
    for (const bool with_draft : {false, true}) {
        std::vector<double> pass_bytes;
        std::string first;
        for (const char* ub : {"512", "7", "1"}) {
            std::vector<std::string> args = {"run", "-m",     model, "-p",  prompt, "-n",
                                             "24",  "--temp", "0",   "-ub", ub};
            if (with_draft) args.insert(args.end(), {"-md", model, "--draft", "4"});
            const auto r = run_specula(args);
            ASSERT_EQ(r.status, 0) << r.err;
            if (first.empty()) first = r.out;
            EXPECT_EQ(r.out, first) << "-ub " << ub << (with_draft ? " with a draft" : "");
            pass_bytes.push_back(passes(r.err));
            ASSERT_GT(pass_bytes.back(), 0) << r.err;
        }
        EXPECT_GT(pass_bytes[0], pass_bytes[1]);
        EXPECT_GE(pass_bytes[1], pass_bytes[2]);
    }
    const auto bad = run_specula({"run", "-m", model, "-p", "hi", "-n", "2", "-ub", "0"});
    EXPECT_NE(bad.status, 0);
    EXPECT_NE(bad.err.find("-ub"), std::string::npos) << bad.err;
}

}  // namespace
