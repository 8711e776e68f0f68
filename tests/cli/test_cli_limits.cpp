// `specula run` and `specula serve` as processes (issue #15): SIGTERM / SIGINT while the model
// loads end the process at once with one line and status 128 + the signal (before, serve blocked
// them until loading was over and then never stopped; test_server_limits checks the clean stop
// once listening), and a prompt too long for the context by
// its bytes alone is refused before it is tokenized (tens of MB: at once, not after seconds).
// Flags out of range are refused before the model loads (seeds over 2^63 were clamped, NaN
// top-p / min-p / synthetic acceptance and a --draft-min no proposal can reach were accepted).
//
// "While loading" is made deterministic by starting the process with the signal already pending
// (blocked in the child before exec; the pending set and the mask survive exec): the command
// unblocks it as it starts loading, so it is delivered there every time, whatever the machine.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

using specula::test::shared_path;
using clock_type = std::chrono::steady_clock;

struct Exit {
    int status = -1;     // exit status, or -1 when killed by a signal
    int signal = 0;      // the signal that killed it, if one did
    std::string output;  // stdout + stderr
    double seconds = 0;
};

// Runs `specula ARGS`; with `pending_signal`, the process starts with that signal pending.
Exit run_specula(const std::vector<std::string>& args, int pending_signal = 0) {
    const std::string log = specula::test::temp_dir("cli-limits") + "/out.log";
    std::vector<std::string> all = {std::string(SPECULA_BINARY_DIR) + "/bin/specula"};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    const auto t0 = clock_type::now();
    const pid_t pid = fork();
    if (pid == 0) {  // only async-signal-safe calls until exec
        const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        if (pending_signal != 0) {
            sigset_t set;
            sigemptyset(&set);
            sigaddset(&set, pending_signal);
            sigprocmask(SIG_BLOCK, &set, nullptr);
            ::kill(::getpid(), pending_signal);
        }
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    Exit e;
    e.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    e.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    e.signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    e.output = specula::test::read_file(log);
    return e;
}

std::string model() {
    return shared_path("models/tinystories/stories260K.gguf");
}

TEST(StopSignals, ServeStopsOnSigtermWhileLoading) {
    const Exit e =
        run_specula({"serve", "-m", model(), "-md", model(), "--port", "0", "-t", "1"}, SIGTERM);
    EXPECT_EQ(e.status, 128 + SIGTERM) << e.output;
    EXPECT_NE(e.output.find("serve: SIGTERM while loading the model, exiting"), std::string::npos)
        << e.output;
    EXPECT_EQ(e.output.find("listening on"), std::string::npos) << e.output;
    EXPECT_LT(e.seconds, 10.0);
}

TEST(StopSignals, ServeStopsOnSigintWhileLoading) {
    const Exit e = run_specula({"serve", "-m", model(), "--port", "0", "-t", "1"}, SIGINT);
    EXPECT_EQ(e.status, 128 + SIGINT) << e.output;
    EXPECT_NE(e.output.find("serve: SIGINT while loading the model, exiting"), std::string::npos)
        << e.output;
}

TEST(StopSignals, RunStopsOnSigtermWhileLoading) {
    const Exit e = run_specula({"run", "-m", model(), "-p", "Once", "-n", "8", "-t", "1"}, SIGTERM);
    EXPECT_EQ(e.status, 128 + SIGTERM) << e.output;
    EXPECT_NE(e.output.find("run: SIGTERM, exiting"), std::string::npos) << e.output;
    EXPECT_EQ(e.output.find("prompt:"), std::string::npos) << "it generated: " << e.output;
}

// A prompt file of 32 MiB cannot fit 256 positions whatever its text: refused by its size, fast.
TEST(PromptBytes, RunRefusesAPromptTooLongByItsBytesBeforeTokenizing) {
    const std::string path = specula::test::temp_dir("cli-limits") + "/big-prompt.txt";
    {
        std::ofstream f(path, std::ios::binary);
        const std::string line = "Once upon a time, there was a little girl named Lily.\n";
        for (size_t n = 0; n < (size_t(32) << 20); n += line.size()) f << line;
    }
    const Exit e = run_specula({"run", "-m", model(), "-f", path, "-c", "256", "-n", "4"});
    EXPECT_EQ(e.status, 1) << e.output;
    EXPECT_NE(e.output.find("error: the prompt is 33554"), std::string::npos) << e.output;
    EXPECT_NE(e.output.find("bytes, so at least"), std::string::npos) << e.output;
    EXPECT_NE(e.output.find("but the context (-c) holds 256"), std::string::npos) << e.output;
    EXPECT_LT(e.seconds, 5.0) << "tokenized before refusing?";
    // A prompt whose bytes could fit is tokenized and checked as before.
    std::string words;
    for (int i = 0; i < 300; ++i) words += " a";
    const Exit ok = run_specula({"run", "-m", model(), "-p", words, "-c", "256", "-n", "1"});
    EXPECT_EQ(ok.status, 1) << ok.output;
    EXPECT_NE(ok.output.find("tokens but the context (-c) holds 256"), std::string::npos)
        << ok.output;
}

// Each case: the flags, and the start of the error line. The model does not exist: every one of
// them must be refused before loading it.
TEST(FlagRanges, RefusedBeforeTheModelLoads) {
    const std::string none = "/nonexistent/model.gguf";
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"run", "--seed", "18446744073709551616"}, "error: --seed must be -1 (random) or a whole"},
        {{"run", "--seed", "1.5"}, "error: --seed must be -1 (random) or a whole"},
        {{"run", "--seed", "-2"}, "error: --seed must be -1 (random) or a whole"},
        {{"bench", "--seed", "-1"}, "error: --seed must be a whole number"},
        {{"run", "--top-p", "nan"}, "error: --top-p must be in [0, 1], got nan"},
        {{"run", "--min-p", "nan"}, "error: --min-p must be in [0, 1], got nan"},
        {{"run", "--temp", "nan"}, "error: --temp must be a finite number"},
        {{"run", "--temp", "inf"}, "error: --temp must be a finite number"},
        {{"bench", "--synthetic-acceptance", "-0.5", "--no-spec"},
         "error: --synthetic-acceptance must be in [0, 1]"},
        {{"bench", "--synthetic-acceptance", "nan", "--no-spec"},
         "error: --synthetic-acceptance must be in [0, 1]"},
        {{"run", "-md", none, "--draft-min", "65"}, "error: --draft-min must be in [0, 64]"},
        {{"run", "-md", none, "--draft", "2", "--draft-min", "3"},
         "error: --draft-min 3 is larger than --draft 2"},
        {{"serve", "-md", none, "--draft", "2", "--draft-min", "3"},
         "error: --draft-min 3 is larger than --draft 2"},
        {{"run", "--spec-type", "ngram", "--spec-ngram-max", "65"},
         "error: --spec-ngram-min/max must satisfy 1 <= min <= max <= 64"},
    };
    for (const auto& [flags, msg] : cases) {
        std::vector<std::string> args = {flags[0], "-m", none, "-p", "x"};
        if (flags[0] == "serve") args = {"serve", "-m", none, "--port", "0"};
        if (flags[0] == "bench") args = {"bench", "-m", none};
        args.insert(args.end(), flags.begin() + 1, flags.end());
        const Exit e = run_specula(args);
        EXPECT_EQ(e.status, 1) << flags[1] << ": " << e.output;
        EXPECT_EQ(e.output.rfind(msg, 0), 0u) << flags[1] << ": " << e.output;
    }
}

// The whole seed range is usable: 2^64 - 1 is that seed, not 2^63 - 1.
TEST(FlagRanges, SeedsAboveTwoToThe63AreNotClamped) {
    const Exit e = run_specula({"run", "-m", model(), "-p", "Once", "-n", "2", "-t", "1", "--temp",
                                "1", "--seed", "18446744073709551615"});
    EXPECT_EQ(e.status, 0) << e.output;
    EXPECT_NE(e.output.find("seed: 18446744073709551615"), std::string::npos) << e.output;
}

}  // namespace
