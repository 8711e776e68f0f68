// llama-cli's prompt conventions in `specula run` (issue #12): escape sequences in -p / -f / -r are
// processed unless --no-escape (llama-cli's -e is on by default), -r stops generation once the
// output contains the text (plain and speculative alike), and llama.cpp options for features
// Specula lacks are refused naming the flag, while options that change nothing a user can see
// are accepted with one warning and leave the output as it is.
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
using specula::test::llama2xs;
using specula::test::ProcResult;
using specula::test::run_specula;
using specula::test::shared_path;
using specula::test::stories;

// stdout of a greedy run of `model` on `prompt`, -n n, with `extra` options; status must be 0.
ProcResult greedy(const std::string& prompt, int n, std::vector<std::string> extra = {},
                  const std::string& model = stories()) {
    std::vector<std::string> args{"run",    "-m", model, "-p", prompt, "-n", std::to_string(n),
                                  "--temp", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    ProcResult r = run_specula(args);
    EXPECT_EQ(r.status, 0) << describe(r);
    return r;
}

// The number in stderr's "prompt: N tokens" line (-1 if none).
int prompt_tokens(const ProcResult& r) {
    const size_t at = r.err.find("prompt: ");
    if (at == std::string::npos) return -1;
    return std::stoi(r.err.substr(at + 8));
}

int count_ids(const std::string& model, const std::string& text) {
    const ProcResult r = run_specula({"tokenize", "-m", model, "-p", text, "--ids"});
    EXPECT_EQ(r.status, 0) << describe(r);
    std::istringstream in(r.out);  // the ids on one line, space-separated
    int n = 0;
    for (std::string id; in >> id;) ++n;
    return n;
}

TEST(CliEscapes, PromptEscapesAreProcessedAsLlamaCliDoes) {
    const ProcResult real = greedy("Once upon a time\nthere was\ta \"dog\"", 16);
    const ProcResult escaped = greedy("Once upon a time\\nthere was\\ta \\\"dog\\\"", 16);
    EXPECT_EQ(escaped.out, real.out);
    EXPECT_EQ(prompt_tokens(escaped), prompt_tokens(real)) << escaped.err;
    // \xHH is a byte; -e says so explicitly; an unknown escape keeps its backslash.
    EXPECT_EQ(greedy("Once\\x20upon", 12, {"-e"}).out, greedy("Once upon", 12).out);
    EXPECT_EQ(greedy("a\\qb", 8).out, greedy("a\\qb", 8, {"--no-escape"}).out);

    // --no-escape: the backslash and the letter stay two characters of the prompt.
    const std::string literal = "Once upon a time\\nthere";
    const ProcResult raw = greedy(literal, 4, {"--no-escape"});
    EXPECT_EQ(prompt_tokens(raw), count_ids(stories(), literal)) << raw.err;
    // Four backslashes are two once escaped: the prompts' token counts tell them apart.
    const std::string four = "Once \\\\\\\\ upon", two = "Once \\\\ upon";
    ASSERT_NE(count_ids(stories(), four), count_ids(stories(), two));
    EXPECT_EQ(prompt_tokens(greedy(four, 4)), count_ids(stories(), two));
    EXPECT_EQ(prompt_tokens(greedy(four, 4, {"--no-escape"})), count_ids(stories(), four));

    // A prompt file is processed the same way (llama-cli escapes the prompt however it came).
    const std::string file = specula::test::temp_dir("cli-llama") + "/prompt.txt";
    std::ofstream(file) << "Once upon a time\\nthere was\\ta \\\"dog\\\"";
    const ProcResult from_file =
        run_specula({"run", "-m", stories(), "-f", file, "-n", "16", "--temp", "0"});
    ASSERT_EQ(from_file.status, 0) << describe(from_file);
    EXPECT_EQ(from_file.out, real.out);
}

TEST(CliReversePrompt, GenerationStopsWhereTheOutputHasIt) {
    const std::string full = greedy("Once upon a time", 60).out;
    const std::string stop = "Lily";
    const size_t at = full.find(stop);
    ASSERT_NE(at, std::string::npos) << "the test needs a continuation containing it: " << full;
    const std::string expected = full.substr(0, at + stop.size());
    // The output is the plain continuation up to the token that completes the text: it ends
    // within that token (its piece may carry bytes after the text, as in llama-cli).
    const auto check = [&](const ProcResult& r, const std::string& what) {
        EXPECT_EQ(r.out.compare(0, expected.size(), expected), 0) << what << ": " << r.out;
        EXPECT_LT(r.out.size(), full.size()) << what;
        EXPECT_EQ(r.out.find(stop), at) << what;
        EXPECT_EQ(full.compare(0, r.out.size(), r.out), 0) << what << ": not a prefix";
    };
    check(greedy("Once upon a time", 60, {"-r", stop}), "plain");
    check(greedy("Once upon a time", 60, {"-r", "no such text", "--reverse-prompt", stop}),
          "two reverse prompts");
    // With a draft model the stop falls inside a verified block: nothing after it is printed.
    const std::string target_full = greedy("Once upon a time", 60, {}, llama2xs()).out;
    const size_t t_at = target_full.find(stop);
    ASSERT_NE(t_at, std::string::npos) << target_full;
    const ProcResult spec =
        greedy("Once upon a time", 60, {"-md", stories(), "--draft", "6", "-r", stop}, llama2xs());
    EXPECT_EQ(spec.out.find(stop), t_at);
    EXPECT_EQ(target_full.compare(0, spec.out.size(), spec.out), 0) << spec.out;
    EXPECT_LT(spec.out.size(), target_full.size());
    // Escapes apply to -r as well ("\n" is a newline); an empty -r is refused.
    const size_t nl = full.find('\n');
    if (nl != std::string::npos) {
        const ProcResult r = greedy("Once upon a time", 60, {"-r", "\\n"});
        EXPECT_EQ(r.out.find('\n'), nl) << r.out;
        EXPECT_LT(r.out.size(), full.size());
    }
    const ProcResult empty = run_specula({"run", "-m", stories(), "-p", "x", "-r", ""});
    EXPECT_EQ(empty.status, 1);
    EXPECT_NE(empty.err.find("-r (--reverse-prompt) must not be empty"), std::string::npos)
        << empty.err;
}

TEST(CliLlamaFlags, MissingFeaturesAreRefusedNamingTheFlag) {
    const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
        {{"--mirostat", "2"}, "--mirostat: this sampler is not implemented"},
        {{"--samplers", "top_k;temperature"}, "--samplers: the sampler order is fixed"},
        {{"--grammar", "root ::= \"a\""}, "--grammar: GBNF grammars are not implemented"},
        {{"--lora", "a.gguf"}, "--lora: LoRA adapters and control vectors are not supported"},
        {{"-cv", "v.gguf"}, "-cv (--control-vector): LoRA adapters"},
        {{"--rope-freq-base", "10000"}, "--rope-freq-base: the RoPE parameters come from the"},
        {{"--override-kv", "a=int:1"}, "--override-kv: the GGUF's metadata"},
        {{"--in-prefix", "x"}, "--in-prefix: llama-cli's raw interactive mode is not supported"},
        {{"--prompt-cache", "c.bin"}, "--prompt-cache: not supported"},
    };
    for (const std::string cmd : {"run", "bench", "serve"}) {
        for (const auto& [extra, msg] : refused) {
            std::vector<std::string> args{cmd, "-m", stories()};
            args.insert(args.end(), extra.begin(), extra.end());
            const ProcResult r = run_specula(args);
            EXPECT_EQ(r.status, 1) << cmd << " " << extra[0] << ": " << describe(r);
            EXPECT_TRUE(r.out.empty()) << cmd << " " << extra[0];
            EXPECT_NE(r.err.find("error: " + msg), std::string::npos)
                << cmd << " " << extra[0] << ": " << r.err;
        }
    }
}

TEST(CliLlamaFlags, CosmeticOptionsWarnAndChangeNothing) {
    const std::string plain = greedy("Once", 8).out;
    ASSERT_FALSE(plain.empty());
    const std::vector<std::pair<std::vector<std::string>, std::string>> accepted = {
        {{"--color"}, "--color ignored"},
        {{"--no-warmup"}, "--no-warmup ignored"},
        {{"--simple-io"}, "--simple-io ignored"},
        {{"--numa", "distribute"}, "--numa ignored"},
        {{"--keep", "4"}, "--keep ignored"},
        {{"-ot", "exps=CPU"}, "--override-tensor ignored"},
        {{"-nr"}, "--no-repack ignored"},
        {{"--no-perf"}, "--no-perf ignored"},
    };
    for (const auto& [extra, warning] : accepted) {
        const ProcResult r = greedy("Once", 8, extra);
        EXPECT_EQ(r.out, plain) << extra[0];
        EXPECT_NE(r.err.find("warning: " + warning), std::string::npos)
            << extra[0] << ": " << r.err;
    }
    // What llama-cli would do anyway, silently: -sp with no special token generated, and
    // --no-display-prompt (Specula never echoes the prompt).
    EXPECT_EQ(greedy("Once", 8, {"-sp", "--no-display-prompt"}).out, plain);
    // llama-server's batching and endpoint switches are accepted by serve (then the bad port
    // stops it before it listens).
    const ProcResult s =
        run_specula({"serve", "-m", stories(), "-cb", "--metrics", "--jinja", "--port", "-1"});
    EXPECT_EQ(s.status, 1) << describe(s);
    for (const std::string w : {"--cont-batching ignored", "--metrics ignored", "--jinja ignored"})
        EXPECT_NE(s.err.find("warning: " + w), std::string::npos) << w << ": " << s.err;
}

// Options no command takes are named once each, in the order typed, with the stray values apart
// (CLI11 saw them reversed and listed values among them).
TEST(CliLlamaFlags, UnknownOptionsAreNamedInTheOrderTyped) {
    const ProcResult r = run_specula({"run", "-m", stories(), "--frobnicate", "3", "--quux",
                                      "--frobnicate", "-p", "Once", "stray"});
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_NE(r.err.find("`specula run`: unknown options --frobnicate, --quux; unexpected values "
                         "3, stray (run `specula run --help` for the options)"),
              std::string::npos)
        << r.err;
    // serve: the model card's line starts; an unknown flag after it is named alone.
    const ProcResult s =
        run_specula({"serve", "-m", stories(), "--temp", "0.6", "--top-k", "20", "--top-p", "0.95",
                     "--min-p", "0", "--nonesuch", "--port", "-1"});
    EXPECT_EQ(s.status, 1) << describe(s);
    EXPECT_NE(s.err.find("unknown option --nonesuch (run `specula serve --help`"),
              std::string::npos)
        << s.err;
}

}  // namespace

// --typical and --top-nsigma (llama-cli's samplers) reshape sampled output, in plain and
// speculative runs alike, leave greedy output alone, and refuse values out of range.
TEST(CliLlamaFlags, TypicalAndTopNSigmaSample) {
    auto sampled = [](std::vector<std::string> extra) {
        std::vector<std::string> args{
            "run",     "-m", llama2xs(), "-p", "Once upon a time", "-n", "48",     "--temp", "1.5",
            "--top-k", "0",  "--top-p",  "1",  "--min-p",          "0",  "--seed", "11"};
        args.insert(args.end(), extra.begin(), extra.end());
        const ProcResult r = run_specula(args);
        EXPECT_EQ(r.status, 0) << describe(r);
        EXPECT_FALSE(r.out.empty()) << describe(r);
        return r.out;
    };
    const std::string base = sampled({});
    EXPECT_EQ(sampled({"--typical", "1"}), base);  // off
    EXPECT_EQ(sampled({"--top-nsigma", "-1"}), base);
    EXPECT_NE(sampled({"--typical", "0.3"}), base);
    EXPECT_NE(sampled({"--top-nsigma", "1"}), base);
    sampled({"--typical", "0.5", "--top-nsigma", "2", "-md", stories(), "--draft", "4"});
    const std::string greedy_text = greedy("Once upon a time", 24).out;
    EXPECT_EQ(greedy("Once upon a time", 24, {"--typical", "0.2", "--top-nsigma", "0.5"}).out,
              greedy_text);
    for (const std::vector<std::string>& bad : {std::vector<std::string>{"--typical", "1.5"},
                                                {"--typical", "-0.1"},
                                                {"--top-nsigma", "nan"}}) {
        const ProcResult r = run_specula({"run", "-m", stories(), "-p", "x", bad[0], bad[1]});
        EXPECT_EQ(r.status, 1) << describe(r);
        EXPECT_NE(r.err.find("error: " + bad[0]), std::string::npos) << r.err;
    }
}
