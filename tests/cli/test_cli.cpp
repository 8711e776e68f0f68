// End-to-end tests of the `specula` binary: it is spawned with real models from ../shared and its
// stdout, stderr and exit status are checked separately. stdout must carry exactly the generated
// text (llama.cpp's reference continuations and llama2.c's golden story), tokenize must print the
// reference ids, and every kind of bad input must end as one `error:` line with status 1.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_checks.h"
#include "cli_process.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "test_util.h"

namespace {

using specula::test::read_file;
using specula::test::shared_path;
using json = nlohmann::json;
using specula::test::describe;
using specula::test::expect_clean_error;
using specula::test::kStoriesRel;
using specula::test::line_with;
using specula::test::ProcResult;
using specula::test::run_specula;

json load_json(const std::string& rel) {
    return json::parse(read_file(shared_path(rel)));
}

std::string unhex(const std::string& hex) {
    std::string out;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) {
        out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    return out;
}

std::string join_ids(const json& ids) {
    std::string s;
    for (const auto& id : ids) s += (s.empty() ? "" : " ") + std::to_string(id.get<int>());
    return s;
}

// llama2.c's published greedy story: the lines after the `./run ... -t 0.0` command in the
// markdown's code block.
std::string golden_story() {
    std::istringstream md(read_file(shared_path("models/tinystories/stories260K.md")));
    std::string line, text;
    bool in_block = false;
    while (std::getline(md, line)) {
        if (!in_block) {
            in_block = line.rfind("$ ./run ", 0) == 0 && line.find("-t 0.0") != std::string::npos;
            continue;
        }
        if (line.rfind("```", 0) == 0) break;
        text += (text.empty() ? "" : "\n") + line;
    }
    if (text.empty()) throw std::runtime_error("golden text not found in stories260K.md");
    return text;
}

TEST(Cli, GoldenTextMatchesTheReferenceJson) {
    const json ref = load_json("reference/stories260K.json");
    EXPECT_EQ(golden_story(), ref["golden_check"]["golden_text"].get<std::string>());
}

TEST(Cli, TokenizeMatchesReferenceIds) {
    for (const char* stem :
         {"stories260K", "rand-llama-d256-l2-Q4_K_M", "rand-llama-gpt2vocab-d64-l1-tied-F16",
          "rand-llama-llama3vocab-d64-l1-tied-Q8_0"}) {
        const json ref = load_json(std::string("reference/") + stem + ".json");
        const std::string model = shared_path(ref["model"]["path"].get<std::string>());
        for (const auto& p : ref["prompts"]) {
            const auto r = run_specula({"tokenize", "-m", model, "-p", p["text"].get<std::string>(),
                                        "--no-parse-special", "--ids"});
            ASSERT_EQ(r.status, 0) << stem << " " << p["name"] << "\n" << describe(r);
            EXPECT_EQ(r.out, join_ids(p["token_ids"]) + "\n") << stem << " " << p["name"];
            EXPECT_EQ(r.err, "");
        }
    }
}

TEST(Cli, TokenizeParsesSpecialTokensByDefault) {
    const json ref = load_json("reference/stories260K.json");
    const std::string bos = std::to_string(ref["model"]["bos_id"].get<int>());
    const std::string model = shared_path(kStoriesRel);
    const auto parsed = run_specula({"tokenize", "-m", model, "-p", "<s>", "--ids"});
    ASSERT_EQ(parsed.status, 0) << describe(parsed);
    EXPECT_EQ(parsed.out, bos + " " + bos + "\n");
    const auto plain =
        run_specula({"tokenize", "-m", model, "-p", "<s>", "--no-parse-special", "--ids"});
    ASSERT_EQ(plain.status, 0) << describe(plain);
    EXPECT_NE(plain.out, parsed.out);
    EXPECT_EQ(plain.out.rfind(bos + " ", 0), 0u) << plain.out;
}

TEST(Cli, GreedyFromBosPrintsTheGoldenStoryOnly) {
    const auto r =
        run_specula({"run", "-m", shared_path(kStoriesRel), "-p", "", "-n", "256", "--temp", "0"});
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_EQ(r.out, golden_story());
    EXPECT_NE(r.err.find("prompt: 1 tokens"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("generated: 256 tokens"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("tok/s"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("load: "), std::string::npos) << r.err;
}

TEST(Cli, GreedyContinuationsMatchLlamaCpp) {
    const json ref = load_json("reference/stories260K.json");
    for (const auto& p : ref["prompts"]) {
        if (p["name"] == "bos_only") continue;
        const int n = static_cast<int>(p["greedy"]["token_ids"].size());
        const auto r =
            run_specula({"run", "-m", shared_path(kStoriesRel), "-p", p["text"].get<std::string>(),
                         "-n", std::to_string(n), "--temp", "0", "-t", "1"});
        ASSERT_EQ(r.status, 0) << p["name"] << "\n" << describe(r);
        EXPECT_EQ(r.out, unhex(p["greedy"]["text_hex"].get<std::string>())) << p["name"];
        const std::string stats = "prompt: " + std::to_string(p["n_prompt_tokens"].get<int>());
        EXPECT_NE(r.err.find(stats), std::string::npos) << r.err;
    }
}

TEST(Cli, SameSeedSameText) {
    auto sample = [](const std::string& seed) {
        return run_specula({"run", "-m", shared_path(kStoriesRel), "-p", "Once upon a time", "-n",
                            "64", "--temp", "0.8", "--seed", seed, "--ignore-eos"});
    };
    const auto a = sample("42"), b = sample("42"), c = sample("1234");
    ASSERT_EQ(a.status, 0) << describe(a);
    ASSERT_EQ(c.status, 0) << describe(c);
    EXPECT_FALSE(a.out.empty());
    EXPECT_EQ(a.out, b.out);
    EXPECT_NE(a.out, c.out) << "different seeds gave the same 64 sampled tokens";
    EXPECT_NE(a.err.find("seed: 42"), std::string::npos) << a.err;
}

TEST(Cli, UnlimitedGenerationStopsAtAFullContext) {
    const auto r = run_specula(
        {"run", "-m", shared_path(kStoriesRel), "-c", "32", "--temp", "0", "--ignore-eos"});
    ASSERT_EQ(r.status, 0) << describe(r);
    // BOS fills one slot; the token sampled after the last slot is still printed.
    EXPECT_NE(r.err.find("generated: 32 tokens"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("context is full"), std::string::npos) << r.err;
    EXPECT_FALSE(r.out.empty());
    EXPECT_EQ(golden_story().rfind(r.out, 0), 0u) << "not a prefix of the golden story: " << r.out;
}

// -ngl 99 runs stories260K on the Vulkan device (lavapipe in CI) and prints the same greedy
// story; `info --devices` lists the device; bad GPU flags are one clear error.
TEST(Cli, GpuLayersRunOnTheDevice) {
#ifdef SPECULA_HAVE_VULKAN
    const std::string device = specula::test::test_vulkan_device();  // lavapipe in CI: named
#else
    const std::string device = "0";
#endif
    const auto r = run_specula({"run", "-m", shared_path(kStoriesRel), "-n", "16", "--temp", "0",
                                "-ngl", "99", "--device", device});
    ASSERT_EQ(r.status, 0) << describe(r);
#ifndef SPECULA_HAVE_VULKAN
    EXPECT_NE(r.err.find("built without Vulkan"), std::string::npos) << r.err;
    EXPECT_EQ(golden_story().rfind(r.out, 0), 0u) << r.out;
    return;
#endif
    EXPECT_NE(r.err.find("to Vulkan device"), std::string::npos) << r.err;
    EXPECT_EQ(golden_story().rfind(r.out, 0), 0u) << r.out;
    EXPECT_FALSE(r.out.empty());
    const auto d = run_specula({"info", "--devices"});
    ASSERT_EQ(d.status, 0) << describe(d);
    EXPECT_NE(d.out.find("Vulkan0: "), std::string::npos) << d.out;
    EXPECT_NE(d.out.find("MiB device memory"), std::string::npos) << d.out;
    const auto none = run_specula({"run", "-m", shared_path(kStoriesRel), "-n", "4", "--temp", "0",
                                   "-ngl", "99", "--device", "none"});
    ASSERT_EQ(none.status, 0) << describe(none);
    EXPECT_EQ(none.err.find("Vulkan device"), std::string::npos) << none.err;
    expect_clean_error(run_specula({"run", "-m", shared_path(kStoriesRel), "-ngl", "-1"}),
                       "--n-gpu-layers must be >= 0");
    expect_clean_error(run_specula({"run", "-m", shared_path(kStoriesRel), "-dev", "CUDA0"}),
                       "--device CUDA0: not a Vulkan device");
    expect_clean_error(
        run_specula({"run", "-m", shared_path(kStoriesRel), "-ngl", "9", "--device", "99"}),
        "--device 99: there are only");
}

TEST(Cli, InfoDescribesTheModel) {
    const json ref = load_json("reference/stories260K.json");
    const auto r = run_specula({"info", shared_path(kStoriesRel)});
    ASSERT_EQ(r.status, 0) << describe(r);
    const std::string n_params = std::to_string(ref["model"]["n_params"].get<int64_t>());
    const std::string n_vocab = std::to_string(ref["model"]["n_vocab"].get<int>());
    for (const std::string& s : {std::string("gguf version:"), std::string("F32"), n_params,
                                 std::string("n_vocab"), n_vocab, std::string("kv cache")}) {
        EXPECT_NE(r.out.find(s), std::string::npos) << "missing '" << s << "' in:\n" << r.out;
    }
    EXPECT_NE(line_with(r.out, "supported:").find("yes"), std::string::npos) << r.out;
}

// gemma4's per-layer shapes: info reads its array keys, says what each kind of layer keeps, and
// the cache line is the engine's (the shared layers keep none).
TEST(Cli, InfoDescribesPerLayerShapes) {
    const std::string path =
        std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/rand-gemma4-tok512-d128-l6-F16.gguf";
    const auto r = run_specula({"info", path, "-c", "256"});
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_NE(line_with(r.out, "supported:").find("yes"), std::string::npos) << r.out;
    const std::string layers = line_with(r.out, "layer kinds:");
    for (const char* s : {"4 sliding (window 16, heads of 32)", "2 full (heads of 64)",
                          "the last 2 read earlier layers' caches"})
        EXPECT_NE(layers.find(s), std::string::npos) << "'" << s << "' not in: " << layers;
    EXPECT_NE(line_with(r.out, "kv cache (f16, as run allocates):").find("at n_ctx 256"),
              std::string::npos)
        << r.out;
}

// nemotron_h: info names its three layer kinds and what each keeps (the Mamba-2 state, the
// attention layer's cache, nothing for the MLP layers), the state counted in the cache line.
TEST(Cli, InfoDescribesNemotronHLayerKinds) {
    const std::string path = std::string(SPECULA_SOURCE_DIR) +
                             "/tests/data/arch/rand-nemotron_h-tok512-d128-l6-F16.gguf";
    const auto r = run_specula({"info", path, "-c", "256"});
    ASSERT_EQ(r.status, 0) << describe(r);
    const std::string layers = line_with(r.out, "layer kinds:");
    for (const char* s : {"3 Mamba-2 (a recurrent state each: 8 heads of 16 x state 16, no cache)",
                          "1 attention (the KV cache, heads of 32)", "2 MLP (nothing kept)"})
        EXPECT_NE(layers.find(s), std::string::npos) << "'" << s << "' not in: " << layers;
    // 256 positions x 64 K and V values in F16 for the one attention layer, plus the state.
    EXPECT_NE(line_with(r.out, "kv cache (f16, as run allocates):").find("323.50 KiB at n_ctx 256"),
              std::string::npos)
        << r.out;
    EXPECT_NE(line_with(r.out, "recurrent state (f32").find("for 3 Mamba-2 layers"),
              std::string::npos)
        << r.out;
}

TEST(Cli, VersionAndHelp) {
    const auto v = run_specula({"--version"});
    EXPECT_EQ(v.status, 0);
    EXPECT_EQ(v.out.rfind("specula ", 0), 0u) << v.out;
    // The build type, the compiler and the SIMD level the kernels use on this machine.
    EXPECT_TRUE(
        std::regex_search(v.out, std::regex("build: (Release|RelWithDebInfo|Debug|MinSizeRel)")))
        << v.out;
    EXPECT_NE(v.out.find("gcc "), std::string::npos) << v.out;
    EXPECT_NE(v.out.find("simd: "), std::string::npos) << v.out;
    const auto h = run_specula({"--help"});
    EXPECT_EQ(h.status, 0);
    for (const char* cmd : {"run", "info", "tokenize"}) {
        EXPECT_NE(h.out.find(cmd), std::string::npos) << h.out;
    }
    const auto rh = run_specula({"run", "--help"});
    EXPECT_EQ(rh.status, 0);
    EXPECT_NE(rh.out.find("--top-k"), std::string::npos) << rh.out;
}

class TempDirTest : public ::testing::Test {
  protected:
    void SetUp() override { dir_ = specula::test::temp_dir("cli"); }
    void TearDown() override { std::filesystem::remove_all(dir_); }
    std::string path(const std::string& name) const { return dir_ + "/" + name; }
    std::string dir_;
};
using CliErrors = TempDirTest;
using CliFiles = TempDirTest;

TEST_F(CliErrors, MissingFile) {
    const std::string missing = path("no-such-model.gguf");
    expect_clean_error(run_specula({"run", "-m", missing, "-n", "4"}), missing);
    expect_clean_error(run_specula({"info", missing}), missing);
    expect_clean_error(run_specula({"tokenize", "-m", missing, "-p", "hi"}), missing);
}

TEST_F(CliErrors, NotAGguf) {
    const std::string p = path("text.gguf");
    std::ofstream(p) << "this is not a model, just some text that is long enough to read\n";
    expect_clean_error(run_specula({"run", "-m", p, "-n", "4"}), p);
    expect_clean_error(run_specula({"info", p}), p);
}

TEST_F(CliErrors, TruncatedGguf) {
    const std::string bytes = read_file(shared_path(kStoriesRel));
    const std::string p = path("truncated.gguf");
    std::ofstream(p, std::ios::binary).write(bytes.data(), bytes.size() / 2);
    expect_clean_error(run_specula({"run", "-m", p, "-n", "4"}), p);
    expect_clean_error(run_specula({"info", p}), p);
}

// stories260K with its architecture renamed: a valid GGUF the engine cannot run.
TEST_F(CliErrors, UnsupportedArchitecture) {
    auto src = specula::GGUFFile::open(shared_path(kStoriesRel));
    specula::GGUFWriter w;
    for (const auto& [key, value] : src->metadata()) {
        if (key == "general.architecture") {
            w.set_string(key, "mamba");
        } else if (key.rfind("llama.", 0) == 0) {
            w.set("mamba." + key.substr(6), value);
        } else {
            w.set(key, value);
        }
    }
    for (const auto& t : src->tensors()) w.add_tensor(t.name, t.ne, t.type, t.data, t.nbytes);
    const std::string p = path("mamba.gguf");
    w.write(p);

    expect_clean_error(run_specula({"run", "-m", p, "-n", "4"}), "mamba");
    const auto info = run_specula({"info", p});
    EXPECT_EQ(info.status, 0) << describe(info);
    EXPECT_NE(info.out.find("mamba"), std::string::npos) << info.out;
    EXPECT_NE(line_with(info.out, "supported:").find("no"), std::string::npos) << info.out;
}

TEST_F(CliFiles, PromptFromAFile) {
    const std::string model = shared_path(kStoriesRel);
    const std::string prompt = "Tom and his dog went to the park.";
    const std::string file = path("prompt.txt");
    std::ofstream(file, std::ios::binary) << prompt;
    const auto from_arg =
        run_specula({"run", "-m", model, "-p", prompt, "-n", "12", "--temp", "0"});
    const auto from_file = run_specula({"run", "-m", model, "-f", file, "-n", "12", "--temp", "0"});
    ASSERT_EQ(from_file.status, 0) << describe(from_file);
    EXPECT_FALSE(from_file.out.empty());
    EXPECT_EQ(from_file.out, from_arg.out);
    expect_clean_error(run_specula({"run", "-m", model, "-p", prompt, "-f", file}), "-f");
    expect_clean_error(run_specula({"run", "-m", model, "-f", path("missing.txt")}), "missing.txt");
}

TEST_F(CliErrors, PromptLongerThanContext) {
    const std::string model = shared_path(kStoriesRel);
    expect_clean_error(run_specula({"run", "-m", model, "-p",
                                    "Once upon a time, there was a little girl named "
                                    "Lily. She loved to play outside in the park.",
                                    "-c", "8", "-n", "4"}),
                       "context");
}

// -n past the context is not an error: generation stops at a full context with a note, as
// llama-cli does; INT_MAX overflows no check.
TEST(Cli, BudgetPastTheContextStopsAtAFullContext) {
    const std::string model = shared_path(kStoriesRel);
    for (const char* n : {"100", "2147483647"}) {
        const auto r = run_specula(
            {"run", "-m", model, "-p", "Once", "-c", "24", "-n", n, "--temp", "0", "--ignore-eos"});
        ASSERT_EQ(r.status, 0) << describe(r);
        EXPECT_NE(r.err.find("note: prompt"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("context is full"), std::string::npos) << r.err;
        EXPECT_FALSE(r.out.empty());
    }
}

// The command a speculative-decoding guide gives for llama-cli, with local paths, runs as pasted:
// -n 512 past llama2xs's 256-token context stops at a full context; --n-gpu-layers 81 puts both
// models on a hardware GPU, or (lavapipe only, as in CI: never picked without --device) says
// they run on the CPU backend, or says the build has no Vulkan.
TEST(Cli, GuideCommandRunsAsPasted) {
    const auto r = run_specula({"run", "-m", shared_path("models/tinystories/llama2xs.gguf"),
                                "--draft", "5", "-md", shared_path(kStoriesRel), "-p",
                                "Once upon a time", "-n", "512", "--n-gpu-layers", "81"});
    ASSERT_EQ(r.status, 0) << describe(r);
#ifdef SPECULA_HAVE_VULKAN
    EXPECT_TRUE(r.err.find("to Vulkan device") != std::string::npos ||
                r.err.find("no hardware GPU: -ngl runs on the CPU backend") != std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("(llvmpipe"), std::string::npos) << "lavapipe was not named: " << r.err;
#else
    EXPECT_NE(r.err.find("running on the CPU"), std::string::npos) << r.err;
#endif
    EXPECT_NE(r.err.find("context is full"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("speculative (draft-model)"), std::string::npos) << r.err;
    EXPECT_FALSE(r.out.empty());
}

// llama.cpp's multi-letter single-dash spellings are whole flags in every command: GPU options
// warn that the run is on the CPU, -fa / -ctk / -td are accepted with a warning naming them, a
// missing feature (-hf, -i) is one error line naming the flag, an unknown -xyz names
// itself; none prints the help or exits 0 by mistake.
TEST(Cli, LlamaCppFlagSpellings) {
    const std::string model = shared_path(kStoriesRel);
    const std::vector<std::string> run{"run", "-m", model, "-p", "Once", "-n", "4", "--temp", "0"};
    const std::string plain = run_specula(run).out;
    ASSERT_FALSE(plain.empty());
    const std::vector<std::pair<std::vector<std::string>, std::string>> accepted = {
        {{"-sm", "row"}, "--split-mode ignored"},
        {{"-ts", "3,1"}, "--tensor-split ignored"},
        {{"-mg", "1"}, "--main-gpu ignored"},
        {{"-nkvo"}, "--no-kv-offload ignored"},
        {{"-fa"}, "--flash-attn ignored"},
        {{"-fa", "on"}, "--flash-attn ignored"},
        {{"-ctkd", "q8_0"}, "--cache-type-k-draft ignored"},
        {{"-td", "1"}, "--threads-draft ignored"},
        {{"-cd", "64"}, "--ctx-size-draft ignored"},
        {{"-tb", "2"}, "--threads-batch ignored"},
        {{"-ub", "512", "-b", "2048"}, "--batch-size ignored"},
    };
    for (const auto& [extra, warning] : accepted) {
        std::vector<std::string> args = run;
        args.insert(args.end(), extra.begin(), extra.end());
        const auto r = run_specula(args);
        ASSERT_EQ(r.status, 0) << extra[0] << ": " << describe(r);
        EXPECT_NE(r.err.find("warning: "), std::string::npos) << extra[0] << ": " << r.err;
        EXPECT_NE(r.err.find(warning), std::string::npos) << extra[0] << ": " << r.err;
        EXPECT_EQ(r.out, plain) << extra[0];
    }
    // The multi-GPU warning is the same in every command.
    const std::string gpu = "--split-mode ignored: specula's GPU backend uses one device";
    for (const std::vector<std::string>& cmd :
         {std::vector<std::string>{"tokenize", "-m", model, "-p", "hi", "-sm", "row"},
          {"info", model, "-sm", "row"},
          {"bench", "-m", model, "--no-spec", "--pp", "8", "-n", "4", "-r", "1", "-sm", "row"}}) {
        const auto r = run_specula(cmd);
        ASSERT_EQ(r.status, 0) << cmd[0] << ": " << describe(r);
        EXPECT_NE(r.err.find(gpu), std::string::npos) << cmd[0] << ": " << r.err;
    }
    // serve warns too, then refuses the bad port (so nothing is left listening).
    const auto s = run_specula({"serve", "-m", model, "-sm", "row", "--port", "-1"});
    EXPECT_EQ(s.status, 1) << describe(s);
    EXPECT_NE(s.err.find(gpu), std::string::npos) << s.err;
    // -md and -np are whole flags: -np is serve's --parallel, and an unknown flag in run.
    const auto np = run_specula({"serve", "-m", model, "-np", "0"});
    EXPECT_EQ(np.status, 1);
    EXPECT_NE(np.err.find("--parallel must be in [1, 256], got 0"), std::string::npos) << np.err;
    const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
        {{"-hf", "ggml-org/model"}, "-hf (--hf-repo): specula does not download models"},
        {{"-hff", "x.gguf"}, "-hff (--hf-file): specula does not download models"},
        {{"-i"}, "-i: llama-cli's raw interactive mode is not supported; use -cnv"},
        {{"-xyz"}, "unknown option -xyz"},
        {{"--bogus"}, "--bogus"},
        {{"-np", "2"}, "--parallel"},
    };
    // Conversation flags are run's (with -cnv) and chat's; elsewhere they say where to go
    // (serve takes --chat-template as llama-server does: test_server_dropin).
    for (const std::string cmd : {"bench", "serve"}) {
        for (const std::string flag : {"-cnv", "-sys", "--chat-template"}) {
            if (cmd == "serve" && flag == "--chat-template") continue;
            const auto r = run_specula({cmd, "-m", model, flag, "x"});
            EXPECT_EQ(r.status, 1) << cmd << " " << flag << ": " << describe(r);
            EXPECT_NE(r.err.find("error: " + flag), std::string::npos) << r.err;
            EXPECT_NE(r.err.find("conversation mode is `specula chat`"), std::string::npos)
                << r.err;
        }
    }
    for (const std::string cmd : {"run", "bench", "serve"}) {
        for (const auto& [extra, msg] : refused) {
            if (cmd == "serve" && extra[0] == "-np") continue;
            std::vector<std::string> args{cmd, "-m", model};
            args.insert(args.end(), extra.begin(), extra.end());
            const auto r = run_specula(args);
            EXPECT_EQ(r.status, 1) << cmd << " " << extra[0] << ": " << describe(r);
            EXPECT_TRUE(r.out.empty()) << cmd << " " << extra[0] << ": " << r.out;
            EXPECT_NE(r.err.find("error: "), std::string::npos) << r.err;
            EXPECT_NE(r.err.find(msg), std::string::npos)
                << cmd << " " << extra[0] << ": " << r.err;
        }
    }
}

// tokenize prints `id -> 'piece'` per token by default (llama-tokenize), ids only with --ids;
// info -c N gives the KV cache for N positions.
TEST(Cli, TokenizePiecesAndInfoContext) {
    const std::string model = shared_path(kStoriesRel);
    const auto ids = run_specula({"tokenize", "-m", model, "-p", "Hello world", "--ids"});
    const auto pieces = run_specula({"tokenize", "-m", model, "-p", "Hello world"});
    ASSERT_EQ(pieces.status, 0) << describe(pieces);
    std::istringstream id_list(ids.out), lines(pieces.out);
    std::string id, line, text;
    int n = 0;
    while (std::getline(lines, line)) {
        ASSERT_TRUE(id_list >> id) << pieces.out;
        const size_t arrow = line.find(" -> '");
        ASSERT_NE(arrow, std::string::npos) << line;
        EXPECT_EQ(std::stoi(line.substr(0, arrow)), std::stoi(id)) << line;
        ASSERT_EQ(line.back(), '\'') << line;
        if (n++ > 0)
            text += line.substr(arrow + 5, line.size() - arrow - 6);
        else
            EXPECT_EQ(line.substr(arrow), " -> '<s>'");
    }
    EXPECT_FALSE(id_list >> id);
    EXPECT_EQ(text, " Hello world");
    const auto full = run_specula({"info", model});
    const auto small = run_specula({"info", model, "-c", "64"});
    ASSERT_EQ(small.status, 0) << describe(small);
    EXPECT_NE(line_with(small.out, "kv cache").find("at n_ctx 64"), std::string::npos) << small.out;
    EXPECT_NE(line_with(small.out, "kv cache"), line_with(full.out, "kv cache"));
    expect_clean_error(run_specula({"info", model, "-c", "-1"}), "-c");
}

// -f - reads the prompt from standard input; -f DIRECTORY is an error naming it.
TEST(Cli, PromptFromStdinAndDirectory) {
    const std::string model = shared_path(kStoriesRel);
    const std::string file = ::testing::TempDir() + "/specula_stdin_prompt.txt";
    {
        std::ofstream f(file);
        f << "Once upon a time";
    }
    const auto a =
        run_specula({"run", "-m", model, "-p", "Once upon a time", "-n", "8", "--temp", "0"});
    const auto b = run_specula({"run", "-m", model, "-f", "-", "-n", "8", "--temp", "0"}, file);
    ASSERT_EQ(b.status, 0) << describe(b);
    EXPECT_EQ(a.out, b.out);
    EXPECT_FALSE(b.out.empty());
    const std::string dir = ::testing::TempDir();
    const auto d = run_specula({"run", "-m", model, "-f", dir, "-n", "4"});
    EXPECT_EQ(d.status, 1);
    EXPECT_NE(d.err.find("is a directory"), std::string::npos) << d.err;
}

TEST_F(CliErrors, BadOptions) {
    const std::string model = shared_path(kStoriesRel);
    expect_clean_error(run_specula({"run", "-m", model, "--bogus"}), "--bogus");
    expect_clean_error(run_specula({"run", "-m", model, "-n", "many"}), "n-predict");
    expect_clean_error(run_specula({"run", "-m", model, "-n", "-5"}), "-n");
    expect_clean_error(run_specula({"run", "-m", model, "--top-p", "2"}), "top-p");
    expect_clean_error(run_specula({"run", "-p", "hello"}), "model");
    for (const char* p : {"nan", "-1", "2"})
        expect_clean_error(run_specula({"run", "-m", model, "-p", "x", "--draft-p-min", p}),
                           "--draft-p-min must be in [0, 1]");
    expect_clean_error(run_specula({"bench", "-m", model, "--no-spec", "--draft-p-min", "nan"}),
                       "--draft-p-min must be in [0, 1]");
    expect_clean_error(run_specula({"bench", "-m", model, "--no-spec", "--pp", "100000000"}),
                       "--pp must be in [0, 65536]");
    // -n 2147483647 overflows nothing: it stops at a full context (Cli.BudgetPastTheContext...).
    expect_clean_error(run_specula({"run", "-m", model, "-f", "/tmp"}), "is a directory");
    // Thread counts are capped by the hardware (4x its threads), before anything is loaded.
    expect_clean_error(run_specula({"run", "-m", model, "-p", "x", "-n", "4", "-t", "1000"}),
                       "-t (--threads) must be at most");
    expect_clean_error(run_specula({"serve", "-m", model, "--port", "0", "-t", "1000000"}),
                       "-t (--threads) must be at most");
    expect_clean_error(run_specula({"explode"}), "explode");
    expect_clean_error(run_specula({}), "subcommand");
}

}  // namespace
