// llama.cpp's DRY flags in `specula run` (sampling/dry.h): on TinyStories models, which repeat
// themselves, DRY changes greedy output and cuts its verbatim repetitions; speculative decoding
// (a draft model at fixed and auto lengths, n-gram lookup) gives the same bytes as plain decoding
// with DRY on; sampled runs are reproducible per seed, plain and speculative (fixed k);
// --dry-penalty-last-n 0 and --dry-multiplier 0 are off; bad values are one error line naming the
// flag. XTC (--xtc-probability, --xtc-threshold) changes sampled output and not greedy output, is
// off over a 0.5 threshold, and runs speculatively.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli_checks.h"
#include "cli_process.h"
#include "test_util.h"

namespace {

using specula::test::describe;
using specula::test::llama2xs;
using specula::test::ProcResult;
using specula::test::run_specula;
using specula::test::shared_path;
using specula::test::stories;

std::string generate(const std::string& model, std::vector<std::string> extra, int n = 160) {
    std::vector<std::string> args{
        "run", "-m", model, "-p", "Once upon a time, there was a", "-n", std::to_string(n)};
    args.insert(args.end(), extra.begin(), extra.end());
    const ProcResult r = run_specula(args);
    EXPECT_EQ(r.status, 0) << describe(r);
    EXPECT_FALSE(r.out.empty()) << describe(r);
    return r.out;
}

// The longest run of words that occurs twice in `text` (non-overlapping starts allowed).
size_t longest_repeated_words(const std::string& text) {
    std::vector<std::string> w;
    std::istringstream in(text);
    for (std::string s; in >> s;) w.push_back(s);
    size_t best = 0;
    for (size_t i = 0; i < w.size(); ++i)
        for (size_t j = i + 1; j < w.size(); ++j) {
            size_t l = 0;
            while (j + l < w.size() && w[i + l] == w[j + l]) ++l;
            best = std::max(best, l);
        }
    return best;
}

const std::vector<std::string> kGreedy = {"--temp", "0"};
const std::vector<std::string> kDry = {"--dry-multiplier",     "1.5", "--dry-base", "1.75",
                                       "--dry-allowed-length", "2"};

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

}  // namespace

TEST(CliDry, ChangesGreedyOutputAndCutsRepetitions) {
    const std::string plain = generate(stories(), kGreedy);
    const std::string dry = generate(stories(), cat(kGreedy, kDry));
    EXPECT_NE(dry, plain);
    EXPECT_LT(longest_repeated_words(dry), longest_repeated_words(plain)) << plain << "\n--\n"
                                                                          << dry;
    // Off: a zero multiplier or a zero window leaves the output as it is.
    EXPECT_EQ(generate(stories(), cat(kGreedy, {"--dry-multiplier", "0"})), plain);
    EXPECT_EQ(generate(stories(), cat(cat(kGreedy, kDry), {"--dry-penalty-last-n", "0"})), plain);
    // A short window sees fewer repetitions than the whole history.
    EXPECT_NE(generate(stories(), cat(cat(kGreedy, kDry), {"--dry-penalty-last-n", "8"})), dry);
}

TEST(CliDry, SpeculativeGreedyIsPlainGreedy) {
    const std::vector<std::string> base = cat(kGreedy, kDry);
    const std::string plain = generate(llama2xs(), base, 96);
    for (const std::vector<std::string>& spec :
         {std::vector<std::string>{"-md", stories(), "--draft", "4"},
          {"-md", stories(), "--draft", "auto"},
          {"--spec-type", "ngram", "--draft", "3"}}) {
        SCOPED_TRACE(spec[1]);
        EXPECT_EQ(generate(llama2xs(), cat(base, spec), 96), plain);
    }
    // The breakers matter: without any, repetitions may run across newlines and quotes.
    const std::string none =
        generate(llama2xs(), cat(base, {"--dry-sequence-breaker", "none"}), 96);
    EXPECT_EQ(
        generate(llama2xs(),
                 cat(base, {"--dry-sequence-breaker", "none", "-md", stories(), "--draft", "4"}),
                 96),
        none);
}

TEST(CliDry, SampledRunsAreReproducible) {
    for (const std::string seed : {"3", "17"}) {
        const std::vector<std::string> args =
            cat(kDry, {"--temp", "0.9", "--seed", seed, "--top-k", "0", "--top-p", "1"});
        const std::string a = generate(llama2xs(), args, 64);
        EXPECT_EQ(generate(llama2xs(), args, 64), a);
        // A fixed draft length: --draft auto follows the measured costs, so the random draws
        // (not their distribution) would depend on the machine's timing.
        const std::vector<std::string> md = cat(args, {"-md", stories(), "--draft", "4"});
        const std::string spec = generate(llama2xs(), md, 64);
        EXPECT_EQ(generate(llama2xs(), md, 64), spec);
    }
}

TEST(CliDry, BadValuesAreOneErrorLine) {
    const std::map<std::vector<std::string>, std::string> bad = {
        {{"--dry-multiplier", "-1"}, "error: --dry-multiplier -1 must be"},
        {{"--dry-multiplier", "nan"}, "error: --dry-multiplier"},
        {{"--dry-multiplier", "1", "--dry-base", "0.5"}, "error: --dry-base 0.5 must be"},
        {{"--dry-allowed-length", "-1"}, "error: --dry-allowed-length -1 must be"},
        {{"--dry-penalty-last-n", "-2"}, "error: --dry-penalty-last-n -2 must be"},
        {{"--dry-sequence-breaker", ""}, "error: --dry-sequence-breaker must not be empty"},
    };
    for (const auto& [flags, msg] : bad) {
        for (const std::string cmd : {"run", "serve"}) {
            std::vector<std::string> args =
                cat({cmd, "-m", stories(), "-p", "x", "-n", "4"}, flags);
            // serve checks its flags before it opens the model: a missing file is never reached.
            if (cmd == "serve") args = cat({cmd, "-m", "/nonexistent/m.gguf"}, flags);
            const ProcResult r = run_specula(args);
            EXPECT_EQ(r.status, 1) << cmd << " " << flags[0] << ": " << describe(r);
            EXPECT_NE(r.err.find(msg), std::string::npos) << cmd << ": " << r.err;
        }
    }
}

TEST(CliXtc, ChangesSampledOutputOnly) {
    const std::vector<std::string> sampled = {"--temp", "1.0",     "--seed", "5",       "--top-k",
                                              "0",      "--top-p", "1",      "--min-p", "0"};
    const std::vector<std::string> on = {"--xtc-probability", "1", "--xtc-threshold", "0.05"};
    const std::string base = generate(llama2xs(), sampled, 64);
    const std::string xtc = generate(llama2xs(), cat(sampled, on), 64);
    EXPECT_NE(xtc, base);
    EXPECT_EQ(generate(llama2xs(), cat(sampled, on), 64), xtc);
    // Over 0.5 nothing can be excluded.
    EXPECT_EQ(generate(llama2xs(),
                       cat(sampled, {"--xtc-probability", "1", "--xtc-threshold", "0.6"}), 64),
              base);
    const std::vector<std::string> md = cat(cat(sampled, on), {"-md", stories(), "--draft", "4"});
    const std::string spec = generate(llama2xs(), md, 64);
    EXPECT_EQ(generate(llama2xs(), md, 64), spec);
    // Greedy takes the best token.
    EXPECT_EQ(generate(llama2xs(), cat(kGreedy, on), 48), generate(llama2xs(), kGreedy, 48));
    for (const std::vector<std::string>& bad :
         {std::vector<std::string>{"--xtc-probability", "1.5"},
          {"--xtc-threshold", "-0.1"},
          {"--xtc-probability", "nan"}}) {
        const ProcResult r = run_specula(cat({"run", "-m", stories(), "-p", "x"}, bad));
        EXPECT_EQ(r.status, 1) << describe(r);
        EXPECT_NE(r.err.find("error: " + bad[0]), std::string::npos) << r.err;
    }
}
