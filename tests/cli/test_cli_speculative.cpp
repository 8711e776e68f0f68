// End-to-end tests of the `specula` binary's speculative decoding: every spelling of the options
// (llama.cpp's, the aliases, vLLM's JSON), MTP heads in the model or beside it, penalties and KV
// cache types with a draft, and the notes a run and bench give when speculation does not pay.
// Greedy speculative output must equal the plain output in every case.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_checks.h"
#include "cli_process.h"
#include "test_util.h"

namespace {

using specula::test::describe;
using specula::test::expect_clean_error;
using specula::test::kStoriesRel;
using specula::test::run_specula;
using specula::test::shared_path;

// `base` with `extra` appended runs speculatively ("speculative (" in its log) and prints
// `plain_out`, the text of `base` alone.
void expect_speculative_run(const std::vector<std::string>& base,
                            const std::vector<std::string>& extra, const std::string& plain_out,
                            const std::string& label) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_specula(args);
    ASSERT_EQ(r.status, 0) << label << ": " << describe(r);
    EXPECT_EQ(r.out, plain_out) << label;
    EXPECT_NE(r.err.find("speculative ("), std::string::npos) << label << ": " << r.err;
}

// Every spelling of the speculative options (llama.cpp's, the aliases, vLLM's JSON) gives the
// target's greedy text, and run, bench and serve accept the same ones.
TEST(Cli, SpeculativeOptionSpellings) {
    const std::string model = shared_path(kStoriesRel);
    const std::string draft = shared_path("models/tinystories/llama2xs.gguf");
    const std::vector<std::string> base{"run", "-m", model,    "-p", "Once upon a time",
                                        "-n",  "40", "--temp", "0"};
    const auto plain = run_specula(base);
    ASSERT_EQ(plain.status, 0) << describe(plain);
    const std::vector<std::vector<std::string>> spellings{
        {"-md", draft, "--draft", "3"},
        {"--model-draft", draft, "--draft-max", "5", "--spec-type", "draft"},
        {"--speculative-model", draft, "--num-speculative-tokens", "2", "--spec-type",
         "draft_model"},
        {"--speculative-config",
         R"({"method": "draft_model", "model": ")" + draft + R"(", "num_speculative_tokens": 4})"},
        {"--spec-type", "ngram", "--draft-n", "auto"},
        {"--lookup", "--spec-ngram-min", "1", "--spec-ngram-max", "3"},
        {"--speculative-config", R"({"method": "ngram", "num_speculative_tokens": 3})"},
    };
    for (const auto& extra : spellings) expect_speculative_run(base, extra, plain.out, extra[0]);
    expect_clean_error(run_specula({"run", "-m", model, "--spec-type", "eagle"}), "--spec-type");
    expect_clean_error(run_specula({"run", "-m", model, "--spec-type", "ngram", "-md", draft}),
                       "-md");
    expect_clean_error(
        run_specula({"bench", "-m", model, "--speculative-config", R"({"method": "medusa"})"}),
        "--speculative-config");
    expect_clean_error(run_specula({"serve", "-m", model, "--draft", "x"}), "--draft");
    for (const std::string cmd : {"run", "bench", "serve"})
        for (const char* p : {"nan", "-0.1", "1.5"})
            expect_clean_error(
                run_specula({cmd, "-m", model, "--spec-type", "ngram", "--draft-p-min", p}),
                "--draft-p-min must be in [0, 1]");
}

// MTP self-speculation (the qwen35 file with one nextn layer): k = 1 and k > 1, every spelling,
// print the plain greedy text; a file without the head is one clear error naming the file.
TEST(Cli, MtpSelfSpeculation) {
    const std::string dir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";
    const std::string model = dir + "rand-qwen35-mtp1-tok512-d128-l4-F16.gguf";
    const std::vector<std::string> base{"run", "-m", model,    "-p", "Once upon a time",
                                        "-n",  "24", "--temp", "0",  "--ignore-eos"};
    const auto plain = run_specula(base);
    ASSERT_EQ(plain.status, 0) << describe(plain);
    for (const auto& extra : std::vector<std::vector<std::string>>{
             {"--spec-type", "mtp", "--draft", "1"},
             {"--spec-type", "draft-mtp", "--draft", "3"},
             {"--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 2})"}}) {
        expect_speculative_run(base, extra, plain.out, extra[1]);
    }
    const std::string no_head = dir + "rand-qwen35-tok512-d128-l4-F16.gguf";
    const auto bad = run_specula({"run", "-m", no_head, "-p", "hi", "--spec-type", "mtp"});
    expect_clean_error(bad, "nextn_predict_layers");
    EXPECT_NE(bad.err.find(no_head), std::string::npos) << bad.err;
    // The same head from a sidecar (the MTP layer split off, make_models.py sidecar) on the
    // file without it: the plain greedy text again.
    const std::string sidecar = dir + "rand-qwen35-mtp1-tok512-d128-l4-F16.sidecar.gguf";
    std::vector<std::string> args = base;
    args[2] = no_head;
    args.insert(args.end(), {"--spec-type", "mtp", "-md", sidecar, "--draft", "3"});
    const auto side = run_specula(args);
    ASSERT_EQ(side.status, 0) << describe(side);
    EXPECT_EQ(side.out, plain.out);
    EXPECT_NE(side.err.find("speculative ("), std::string::npos) << side.err;
    EXPECT_NE(side.err.find("speculative: mtp (head from " + sidecar + ")"), std::string::npos)
        << side.err;
    // A sidecar that does not fit (another architecture's; a file without nextn layers): one
    // clear error naming the key and the sidecar.
    const std::string moe_sidecar =
        dir + "rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16.sidecar.gguf";
    const auto foreign =
        run_specula({"run", "-m", no_head, "-p", "hi", "--spec-type", "mtp", "-md", moe_sidecar});
    expect_clean_error(foreign, "general.architecture");
    EXPECT_NE(foreign.err.find(moe_sidecar), std::string::npos) << foreign.err;
    const auto no_nextn =
        run_specula({"run", "-m", no_head, "-p", "hi", "--spec-type", "mtp", "-md", no_head});
    expect_clean_error(no_nextn, "qwen35.nextn_predict_layers");
}

// --repeat-penalty, --repeat-last-n, --presence-penalty, --frequency-penalty and --logit-bias
// change greedy output, and speculative decoding (a draft model, n-gram lookup, --draft auto)
// gives exactly the plain output with the same penalties: the verifier sees, at each draft
// position, the row penalised by the history including the drafts before it.
TEST(Cli, PenaltiesKeepSpeculativeExact) {
    const std::string model = shared_path(kStoriesRel);
    const std::string draft = shared_path("models/tinystories/llama2xs.gguf");
    const std::vector<std::string> base{"run", "-m", model,    "-p", "Once upon a time",
                                        "-n",  "80", "--temp", "0",  "--ignore-eos"};
    const std::vector<std::string> pen{
        "--repeat-penalty",    "1.3", "--repeat-last-n", "32",      "--presence-penalty", "0.4",
        "--frequency-penalty", "0.2", "--logit-bias",    "263-inf", "--logit-bias",       "29+0.5"};
    auto run = [&](std::vector<std::string> extra, bool with_pen) {
        std::vector<std::string> args = base;
        if (with_pen) args.insert(args.end(), pen.begin(), pen.end());
        args.insert(args.end(), extra.begin(), extra.end());
        const auto r = run_specula(args);
        EXPECT_EQ(r.status, 0) << describe(r);
        return r.out;
    };
    const std::string unpenalised = run({}, false);
    const std::string plain = run({}, true);
    ASSERT_FALSE(plain.empty());
    EXPECT_NE(plain, unpenalised) << "the penalties changed nothing";
    for (const std::vector<std::string>& spec :
         {std::vector<std::string>{"-md", draft, "--draft", "4"},
          {"-md", draft, "--draft", "auto"},
          {"--spec-type", "ngram", "--draft", "3"}})
        EXPECT_EQ(run(spec, true), plain) << spec[0] << " " << spec.back();
    expect_clean_error(run_specula({"run", "-m", model, "--repeat-penalty", "0"}),
                       "--repeat-penalty");
    expect_clean_error(run_specula({"run", "-m", model, "--repeat-last-n", "-2"}),
                       "--repeat-last-n");
    expect_clean_error(run_specula({"run", "-m", model, "--presence-penalty", "nan"}),
                       "--presence-penalty");
    expect_clean_error(run_specula({"run", "-m", model, "--logit-bias", "99999+1"}),
                       "--logit-bias");
    expect_clean_error(run_specula({"run", "-m", model, "--logit-bias", "abc"}), "--logit-bias");
}

// qwen35 / qwen35moe (recurrent DeltaNet layers, rolled back inside each verify pass): `run`
// with a draft model (the 1-layer qwen3 draft of the same vocabulary, and the qwen35 file
// itself) and with n-gram lookup prints the same text as plain greedy decoding.
TEST(Cli, Qwen35SpeculativeEqualsPlain) {
    const std::string dir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";
    const std::string draft = dir + "rand-qwen3-tok512-d256-l1-draft-Q8_0.gguf";
    for (const std::string& model : {dir + "rand-qwen35-tok512-d128-l4-F16.gguf",
                                     dir + "rand-qwen35moe-e8x2-tok512-d128-l3-F16.gguf"}) {
        auto run = [&](std::vector<std::string> extra) {
            std::vector<std::string> args{"run", "-m", model,    "-p", "Once upon a time there was",
                                          "-n",  "48", "--temp", "0",  "--ignore-eos",
                                          "-t",  "1"};
            args.insert(args.end(), extra.begin(), extra.end());
            const auto r = run_specula(args);
            EXPECT_EQ(r.status, 0) << describe(r);
            return r.out;
        };
        const std::string plain = run({});
        ASSERT_FALSE(plain.empty());
        for (const std::vector<std::string>& spec :
             {std::vector<std::string>{"-md", draft, "--draft", "4"},
              {"-md", dir + "rand-qwen35-tok512-d128-l4-F16.gguf", "--draft", "3"},
              {"--spec-type", "ngram", "--draft", "3"}})
            EXPECT_EQ(run(spec), plain) << model << ": " << spec[0] << " " << spec[1];
    }
}

// --draft 15 with a draft as large as the target is slower than plain decoding: the run says so
// in one line with a suggestion (measured against one-token target passes at the end).
// The plain step's cost comes from the few one-token passes near the end, so one of them
// descheduled on a loaded machine (ctest -j) can hide the note: up to three runs, one thread.
TEST(Cli, SlowSpeculationIsReported) {
    std::string err;
    for (int attempt = 0; attempt < 3; ++attempt) {
        const auto r = run_specula({"run", "-m", shared_path(kStoriesRel), "-md",
                                    shared_path("models/tinystories/llama2xs.gguf"), "--draft",
                                    "15", "-p", "Once upon a time", "-n", "200", "--temp", "0",
                                    "--ignore-eos", "-t", "1"});
        ASSERT_EQ(r.status, 0) << describe(r);
        err = r.err;
        if (err.find("note: speculation was slower than plain decoding") != std::string::npos)
            break;
    }
    EXPECT_NE(err.find("note: speculation was slower than plain decoding"), std::string::npos)
        << err;
}

// bench says plainly when no draft length beats plain decoding. Medians of 5 repetitions: a
// single sub-millisecond repetition is too noisy on a shared machine. Without --draft auto: it
// may fall back to plain steps, and then ties plain decoding within that noise (CI once had it
// at 1.09x). The plain runs last well under a millisecond, so a loaded machine (ctest -j) can
// still slow them more than the draft's: up to three runs, as SlowSpeculationIsReported.
TEST(Cli, BenchSaysWhenPlainIsFaster) {
    std::string all, err;
    for (int attempt = 0; attempt < 3; ++attempt) {
        const auto r = run_specula({"bench", "-m", shared_path(kStoriesRel), "-md",
                                    shared_path("models/tinystories/llama2xs.gguf"), "-n", "32",
                                    "-r", "5", "--pp", "8", "--batches", "1,2", "--no-auto"});
        ASSERT_EQ(r.status, 0) << describe(r);
        all = r.out + r.err;
        err = r.err;
        if (all.find("no draft length beats plain decoding") != std::string::npos) break;
    }
    EXPECT_NE(all.find("no draft length beats plain decoding"), std::string::npos) << all;
    // bench plans memory as run does, before any cache.
    EXPECT_NE(err.find("bench: memory: runtime "), std::string::npos) << err;
    EXPECT_NE(err.find(" + weights 1.12 MiB + KV "), std::string::npos) << err;
}

// -ctk / -ctv: each KV cache type runs (the log line names them), greedy speculative output
// equals plain output with that type, a bad type is one error line in run, bench and serve.
TEST(Cli, CacheTypes) {
    const std::string model = shared_path(kStoriesRel);
    const std::string draft = shared_path("models/tinystories/llama2xs.gguf");
    for (const std::string t : {"f32", "f16", "q8_0"}) {
        const std::vector<std::string> base = {"run", "-m",   model,    "-p",   "Once upon a time",
                                               "-n",  "96",   "--temp", "0",    "-t",
                                               "1",   "-ctk", t,        "-ctv", t};
        const auto plain = run_specula(base);
        ASSERT_EQ(plain.status, 0) << describe(plain);
        EXPECT_NE(plain.err.find("kv cache: k " + t + ", v " + t), std::string::npos) << plain.err;
        EXPECT_GT(plain.out.size(), 200u);
        std::vector<std::string> spec = base;
        spec.insert(spec.end(), {"-md", draft, "--draft", "4"});
        const auto s = run_specula(spec);
        ASSERT_EQ(s.status, 0) << describe(s);
        EXPECT_EQ(s.out, plain.out) << "speculative != plain with a " << t << " cache";
    }
    const auto mixed = run_specula({"run", "-m", model, "-n", "4", "-ctk", "f32", "-ctv", "q8_0"});
    ASSERT_EQ(mixed.status, 0) << describe(mixed);
    EXPECT_NE(mixed.err.find("kv cache: k f32, v q8_0"), std::string::npos) << mixed.err;
    const auto def = run_specula({"run", "-m", model, "-n", "4"});
    EXPECT_NE(def.err.find("kv cache: k f16, v f16"), std::string::npos) << def.err;

    expect_clean_error(run_specula({"run", "-m", model, "-ctk", "q4_0"}),
                       "-ctk (--cache-type-k) must be f32, f16 or q8_0, got 'q4_0'");
    expect_clean_error(run_specula({"bench", "-m", model, "--no-spec", "-ctv", "bf16"}),
                       "-ctv (--cache-type-v) must be f32, f16 or q8_0, got 'bf16'");
    expect_clean_error(run_specula({"serve", "-m", model, "-ctk", "x", "--port", "1"}),
                       "-ctk (--cache-type-k) must be f32, f16 or q8_0, got 'x'");
    const auto b = run_specula({"bench", "-m", model, "--no-spec", "--pp", "8", "-n", "4", "-r",
                                "1", "-ctk", "q8_0", "-ctv", "q8_0"});
    EXPECT_EQ(b.status, 0) << describe(b);
}

}  // namespace
