// llama-cli's habits in the `specula` command (issue #26's paper cuts): -f and stdin drop one
// trailing newline as llama-cli's -f does; --draft N without a drafter says it does nothing;
// `info` sizes the KV cache with the default cache type (F16); `specula -m X -p ...` points to
// `specula run`.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "cli_checks.h"
#include "cli_process.h"
#include "test_util.h"

namespace {

using specula::test::ProcResult;
using specula::test::run_specula;
using specula::test::shared_path;
using specula::test::stories;

std::string write_file(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
}

ProcResult greedy(std::vector<std::string> args, const std::string& stdin_path = "/dev/null") {
    std::vector<std::string> all = {"run", "-m", stories(), "-n", "12", "--temp", "0"};
    all.insert(all.end(), args.begin(), args.end());
    return run_specula(all, stdin_path);
}

TEST(CliDropIn, PromptFileAndStdinDropOneTrailingNewline) {
    const ProcResult p = greedy({"-p", "Once upon a time"});
    ASSERT_EQ(p.status, 0) << p.err;
    const std::string one = write_file("dropin_one_newline.txt", "Once upon a time\n");
    const ProcResult f = greedy({"-f", one});
    ASSERT_EQ(f.status, 0) << f.err;
    EXPECT_EQ(f.out, p.out) << "-f keeps the file's trailing newline";
    const ProcResult in = greedy({"-f", "-"}, one);
    EXPECT_EQ(in.out, p.out) << "stdin keeps its trailing newline";
    // Only one: a second newline is the prompt's.
    const std::string two = write_file("dropin_two_newlines.txt", "Once upon a time\n\n");
    const ProcResult p1 = greedy({"-p", "Once upon a time\\n"});
    const ProcResult f2 = greedy({"-f", two});
    EXPECT_EQ(f2.out, p1.out);
    EXPECT_NE(f2.out, p.out) << "the newline changes the continuation, so this test can fail";
}

TEST(CliDropIn, DraftWithoutADrafterSaysSo) {
    const ProcResult r = greedy({"-p", "Once", "--draft", "5"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("--draft 5 does nothing without a drafter"), std::string::npos) << r.err;
    const ProcResult quiet = greedy({"-p", "Once"});
    EXPECT_EQ(quiet.err.find("does nothing without a drafter"), std::string::npos) << quiet.err;
    const ProcResult with = greedy(
        {"-p", "Once", "--draft", "5", "-md", shared_path("models/tinystories/llama2xs.gguf")});
    ASSERT_EQ(with.status, 0) << with.err;
    EXPECT_EQ(with.err.find("does nothing without a drafter"), std::string::npos) << with.err;
}

TEST(CliDropIn, InfoSizesTheKvCacheAsF16) {
    const ProcResult r = run_specula({"info", stories(), "-c", "512"});
    ASSERT_EQ(r.status, 0) << r.err;
    // stories260K: 5 layers, 4 KV heads of 8 dimensions for K and for V, 2 bytes each:
    // 5 * 512 * 4 * (8 + 8) * 2 = 327680 bytes.
    EXPECT_NE(r.out.find("kv cache (f16):"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("320.00 KiB at n_ctx 512"), std::string::npos) << r.out;
}

TEST(CliDropIn, LlamaCliCommandLineSuggestsRun) {
    const ProcResult r = run_specula({"-m", stories(), "-p", "Once"});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("`specula run -m ...`"), std::string::npos) << r.err;
    EXPECT_EQ(run_specula({"--version"}).status, 0);
}

#ifdef SPECULA_HAVE_VULKAN
// -ngl without --device never runs on a software Vulkan device (lavapipe): with only those the
// layers stay on the CPU backend with one line saying so; a hardware GPU is chosen over them.
TEST(CliDropIn, GpuLayersNeverPickASoftwareDevice) {
    const ProcResult devices = run_specula({"info", "--devices"});
    ASSERT_EQ(devices.status, 0);
    bool hardware = false;
    for (const char* t : {"(discrete GPU, ", "(integrated GPU, ", "(virtual GPU, ", "(other, "})
        hardware = hardware || devices.out.find(t) != std::string::npos;
    const ProcResult plain = greedy({"-p", "Once upon a time"});
    const ProcResult r = greedy({"-p", "Once upon a time", "-ngl", "99"});
    ASSERT_EQ(r.status, 0) << r.err;
    if (!hardware) {
        EXPECT_NE(r.err.find("no hardware GPU: -ngl runs on the CPU backend"), std::string::npos)
            << r.err;
        EXPECT_EQ(r.err.find("to Vulkan device"), std::string::npos) << r.err;
        EXPECT_EQ(r.out, plain.out) << "the CPU backend's output";
    } else {
        EXPECT_NE(r.err.find("to Vulkan device"), std::string::npos) << r.err;
        EXPECT_EQ(r.err.find("llvmpipe"), std::string::npos) << r.err;
    }
    // Named, the software device runs the layers.
    if (devices.out.find(" (CPU, ") != std::string::npos) {
        const ProcResult named = greedy({"-p", "Once upon a time", "-ngl", "99", "--device",
                                         specula::test::test_vulkan_device()});
        ASSERT_EQ(named.status, 0) << named.err;
        EXPECT_NE(named.err.find("to Vulkan device"), std::string::npos) << named.err;
    }
}
#endif

}  // namespace
