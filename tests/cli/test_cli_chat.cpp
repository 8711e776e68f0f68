// `specula chat` / `specula run -cnv` end to end. Piped: the chat template is the model's
// (llama3 for the llama3-vocabulary model, plain "User: ... Assistant:" for stories260K, or
// --chat-template), -sys and -p make the first turn, each turn reports its new and cached prompt
// tokens (after the first, only the new turn is evaluated: the cached count is everything before
// it), with a draft model the acceptance, and bad conversation flags are one error line. In a
// real terminal (tmux send-keys / capture-pane): replies stream after each line typed, `/exit`
// and Ctrl-D end with status 0, Ctrl-C during a reply stops it and returns to the prompt, Ctrl-C
// at the prompt exits with status 130; `run` ends its text's line in a terminal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_checks.h"
#include "cli_process.h"
#include "test_util.h"

namespace {

using specula::test::describe;
using specula::test::ProcResult;
using specula::test::read_file;
using specula::test::run_specula;
using specula::test::shared_path;
namespace fs = std::filesystem;

const std::string kStories = "models/tinystories/stories260K.gguf";
const std::string kDraft = "models/tinystories/llama2xs.gguf";
const std::string kLlama3 = "models/synthetic/rand-llama-llama3vocab-d64-l1-tied-Q8_0.gguf";

fs::path temp_dir() {
    const fs::path d = fs::temp_directory_path() /
                       ("specula_chat_" + std::to_string(getpid()) + "_" +
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(d);
    return d;
}

std::string write_file(const fs::path& p, const std::string& text) {
    std::ofstream(p) << text;
    return p.string();
}

// The per-turn stats lines: {new tokens, cached tokens, reply tokens}.
struct TurnStats {
    int n_new, n_cached, n_reply;
};
std::vector<TurnStats> turn_stats(const std::string& err) {
    std::vector<TurnStats> out;
    const std::regex re(R"(\[prompt: (\d+) new tokens \((\d+) cached\).*reply: (\d+) tokens)");
    for (auto it = std::sregex_iterator(err.begin(), err.end(), re); it != std::sregex_iterator();
         ++it)
        out.push_back({std::stoi((*it)[1]), std::stoi((*it)[2]), std::stoi((*it)[3])});
    return out;
}

// Each turn after the first evaluates only itself: the cache holds every earlier token (the
// last reply token is evaluated with the new turn).
void expect_incremental(const std::vector<TurnStats>& t) {
    int total = 0;
    for (size_t i = 0; i < t.size(); ++i) {
        EXPECT_EQ(t[i].n_cached, i == 0 ? 0 : total - 1) << "turn " << i + 1;
        total = t[i].n_cached + t[i].n_new + t[i].n_reply;
    }
}

ProcResult chat_piped(const std::vector<std::string>& args, const std::string& input) {
    const std::string in = write_file(temp_dir() / "input.txt", input);
    std::vector<std::string> a = {"chat", "-t", "1", "--temp", "0"};
    a.insert(a.end(), args.begin(), args.end());
    return run_specula(a, in);
}

TEST(CliChat, PipedTurnsUseTheModelsTemplateAndKeepTheCache) {
    const ProcResult r = chat_piped(
        {"-m", shared_path(kLlama3), "-n", "10", "-sys", "Be brief", "-p", "Hello there"},
        "how are you\nand then?\n");
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_NE(r.err.find("chat template: jinja (the model's tokenizer.chat_template)"),
              std::string::npos)
        << r.err;
    const auto t = turn_stats(r.err);
    ASSERT_EQ(t.size(), 3u) << r.err;
    // <|begin_of_text|> system header "Be brief" <|eot_id|> ... user "Hello there" ... assistant
    EXPECT_GT(t[0].n_new, 10);
    for (const auto& s : t) EXPECT_EQ(s.n_reply, 10);
    expect_incremental(t);
    EXPECT_EQ(r.out.back(), '\n') << "stdout does not end with a newline";
}

TEST(CliChat, PlainTemplateDraftModelAndRunCnvAgree) {
    const std::string input = "The cat sat\nThe dog ran\n";
    const ProcResult chat = chat_piped({"-m", shared_path(kStories), "-md", shared_path(kDraft),
                                        "--draft", "3", "-n", "16", "-p", "Once upon a time"},
                                       input);
    ASSERT_EQ(chat.status, 0) << describe(chat);
    EXPECT_NE(chat.err.find("chat template: plain"), std::string::npos) << chat.err;
    EXPECT_NE(chat.err.find("no tokenizer.chat_template"), std::string::npos) << chat.err;
    const auto t = turn_stats(chat.err);
    ASSERT_EQ(t.size(), 3u) << chat.err;
    expect_incremental(t);
    EXPECT_NE(chat.err.find("drafted ("), std::string::npos) << "no acceptance shown: " << chat.err;

    // Greedy: the draft model changes nothing, and `run -cnv` is the same conversation mode.
    const std::string in = write_file(temp_dir() / "in2.txt", input);
    const ProcResult plain =
        run_specula({"run", "-cnv", "-t", "1", "--temp", "0", "-m", shared_path(kStories), "-n",
                     "16", "-p", "Once upon a time"},
                    in);
    ASSERT_EQ(plain.status, 0) << describe(plain);
    EXPECT_EQ(plain.out, chat.out);
    EXPECT_EQ(plain.err.find("drafted ("), std::string::npos);
}

// A conversation longer than the context goes on: the oldest exchanges are forgotten (the cache
// keeps the common start), each prompt leaves a quarter of the context for the reply, and a
// message that cannot fit at all is refused while the chat goes on.
TEST(CliChat, AFullContextForgetsTheOldestExchanges) {
    const std::string huge(2000, 'a');
    const ProcResult r =
        chat_piped({"-m", shared_path(kStories), "-c", "96", "-n", "30", "-p", "Once upon a time"},
                   "Tell me a story\nAnd then what happened\n" + huge + "\nMore please\nAgain\n");
    ASSERT_EQ(r.status, 0) << describe(r);
    const auto t = turn_stats(r.err);
    ASSERT_EQ(t.size(), 5u) << r.err;
    EXPECT_NE(r.err.find("forgot its 1 oldest exchange to go on"), std::string::npos) << r.err;
    const size_t refused = r.err.find("error: this message does not fit: the prompt is");
    EXPECT_NE(refused, std::string::npos) << r.err;
    // It was refused before anything was forgotten for it: no "forgot" since the turn before.
    const size_t last_turn = r.err.rfind("[prompt: ", refused);
    ASSERT_NE(last_turn, std::string::npos) << r.err;
    EXPECT_EQ(r.err.substr(last_turn, refused - last_turn).find("forgot"), std::string::npos)
        << r.err;
    for (const auto& s : t) {
        EXPECT_EQ(s.n_reply, 30);
        EXPECT_LE(s.n_cached + s.n_new + 96 / 4, 96) << "no room left for the reply";
    }
}

TEST(CliChat, ChatTemplateFlagAndErrors) {
    const ProcResult r = chat_piped(
        {"-m", shared_path(kStories), "-n", "4", "--chat-template", "chatml", "-p", "Hi"}, "");
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_NE(r.err.find("chat template: chatml (--chat-template)"), std::string::npos) << r.err;

    const ProcResult bad =
        chat_piped({"-m", shared_path(kStories), "--chat-template", "nonesuch", "-p", "Hi"}, "");
    EXPECT_EQ(bad.status, 1) << describe(bad);
    EXPECT_NE(bad.err.find("error: unknown chat template 'nonesuch'"), std::string::npos)
        << bad.err;
    EXPECT_NE(bad.err.find("chatml"), std::string::npos) << bad.err;

    // --chat-template-file: a Jinja template rendered by the engine; a bad file is an error
    // naming it, before the model loads.
    const std::string tmpl = write_file(temp_dir() / "chat.jinja",
                                        "{% for m in messages %}<{{ m.role }}>{{ m.content }}"
                                        "{% endfor %}{% if add_generation_prompt %}<a>{% endif %}");
    const ProcResult f = chat_piped(
        {"-m", shared_path(kStories), "-n", "4", "--chat-template-file", tmpl, "-p", "Hi"}, "");
    ASSERT_EQ(f.status, 0) << describe(f);
    EXPECT_NE(f.err.find("chat template: jinja (--chat-template-file " + tmpl + ")"),
              std::string::npos)
        << f.err;
    const std::string missing = (temp_dir() / "missing.jinja").string();
    const ProcResult m =
        chat_piped({"-m", shared_path(kStories), "--chat-template-file", missing, "-p", "Hi"}, "");
    EXPECT_EQ(m.status, 1) << describe(m);
    EXPECT_NE(m.err.find("error: --chat-template-file: cannot read '" + missing + "'"),
              std::string::npos)
        << m.err;
    const std::string broken = write_file(temp_dir() / "broken.jinja", "{% for %}");
    const ProcResult b =
        chat_piped({"-m", shared_path(kStories), "--chat-template-file", broken, "-p", "Hi"}, "");
    EXPECT_EQ(b.status, 1) << describe(b);
    EXPECT_NE(b.err.find("broken.jinja) does not parse"), std::string::npos) << b.err;

    // Conversation flags without conversation mode, and llama-cli's raw interactive mode.
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"-sys", "x"}, std::vector<std::string>{"--chat-template", "x"},
          std::vector<std::string>{"--chat-template-file", "x"}}) {
        std::vector<std::string> a = {"run", "-m", shared_path(kStories), "-p", "Hi"};
        a.insert(a.end(), args.begin(), args.end());
        const ProcResult e = run_specula(a);
        EXPECT_EQ(e.status, 1) << describe(e);
        EXPECT_NE(e.err.find("needs conversation mode: add -cnv"), std::string::npos) << e.err;
    }
    const ProcResult i = run_specula({"run", "-m", shared_path(kStories), "-i"});
    EXPECT_EQ(i.status, 1) << describe(i);
    EXPECT_NE(i.err.find("error: -i: llama-cli's raw interactive mode is not supported; use -cnv"),
              std::string::npos)
        << i.err;
}

// A `specula chat` in a detached tmux session on its own server socket.
class TmuxChat {
  public:
    // `then`: a shell command run after the program.
    explicit TmuxChat(const std::vector<std::string>& args, const std::string& command = "chat",
                      const std::string& then = "")
        : dir_(temp_dir()) {
        static int n_sessions = 0;  // a fresh server each time: a killed one may linger a moment
        socket_ = "specula-test-" + std::to_string(getpid()) + "-" + std::to_string(++n_sessions);
        err_path_ = (dir_ / "stderr.txt").string();
        status_path_ = (dir_ / "status.txt").string();
        // Under bash (which waits on, and does not die with, a child that handles Ctrl-C), so
        // that the exit status reaches a file: tmux's #{pane_dead_status} is sometimes empty.
        std::string cmd = specula::test::specula_binary() + " " + command;
        for (const auto& a : args) cmd += " '" + a + "'";
        cmd += " 2>" + err_path_ + "; echo $? > " + status_path_;
        if (!then.empty()) cmd += "; " + then;
        // remain-on-exit is set in the same tmux command, before the server can see a fast
        // program end: set after it, a run that ended first took the session and the server
        // with it (the screen was lost).
        tmux("new-session -d -s chat -x 150 -y 60 " + quote("exec bash -c " + quote(cmd)) +
             " \\; set-option -t chat remain-on-exit on");
    }
    ~TmuxChat() { tmux("kill-server"); }

    std::string screen() { return tmux("capture-pane -p -J -S - -t chat"); }
    void keys(const std::string& k) { tmux("send-keys -t chat " + k); }
    void type_line(const std::string& text) {
        keys("-l " + quote(text) + " \\; send-keys -t chat Enter");
    }

    // Waits up to 60 s for `n` prompts ("> " at a line start) on the screen.
    bool wait_prompts(int n) {
        return wait([&] { return count_prompts(screen()) >= n; });
    }
    // Waits for the program to end; its exit status, or -1 on timeout.
    int wait_exit() {
        int status = -1;
        wait([&] {
            if (!fs::exists(status_path_)) return false;
            const std::string s = read_file(status_path_);
            if (s.empty() || s.back() != '\n') return false;
            status = std::stoi(s);
            return true;
        });
        return status;
    }
    std::string err() { return read_file(err_path_); }

    static int count_prompts(const std::string& screen) {
        int n = 0;
        std::istringstream in(screen);
        std::string line;
        while (std::getline(in, line))
            if (line.rfind("> ", 0) == 0 || line == ">") ++n;
        return n;
    }

  private:
    template <class F>
    static bool wait(F done) {
        for (int i = 0; i < 600; ++i) {
            if (done()) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        return false;
    }
    static std::string quote(const std::string& s) {
        std::string q = "'";
        for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
        return q + "'";
    }
    std::string tmux(const std::string& args) {
        const std::string cmd = "tmux -L " + socket_ + " " + args + " 2>&1";
        std::string out;
        if (FILE* p = popen(cmd.c_str(), "r")) {
            char buf[4096];
            size_t n;
            while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
            pclose(p);
        }
        return out;
    }

    fs::path dir_;
    std::string socket_, err_path_, status_path_;
};

TEST(CliChatTmux, TurnsStreamInATerminalAndExitEnds) {
    TmuxChat chat({"-m", shared_path(kStories), "-t", "1", "--temp", "0", "-n", "12", "-sys",
                   "You tell stories"});
    ASSERT_TRUE(chat.wait_prompts(1)) << chat.screen() << chat.err();
    chat.type_line("Once upon a time");
    ASSERT_TRUE(chat.wait_prompts(2)) << chat.screen() << chat.err();
    chat.type_line("Then what happened?");
    ASSERT_TRUE(chat.wait_prompts(3)) << chat.screen() << chat.err();
    chat.type_line("/exit");
    EXPECT_EQ(chat.wait_exit(), 0) << chat.screen() << chat.err();
    const std::string screen = chat.screen();
    EXPECT_NE(screen.find("> Once upon a time"), std::string::npos) << screen;
    EXPECT_NE(screen.find("> Then what happened?"), std::string::npos) << screen;

    // The replies on the screen are the ones a piped conversation gives.
    const ProcResult piped =
        chat_piped({"-m", shared_path(kStories), "-n", "12", "-sys", "You tell stories"},
                   "Once upon a time\nThen what happened?\n/exit\n");
    ASSERT_EQ(piped.status, 0) << describe(piped);
    std::istringstream lines(piped.out);
    std::string line;
    int replies = 0;
    while (std::getline(lines, line)) {
        if (line.empty() || line.rfind(">", 0) == 0) continue;
        EXPECT_NE(screen.find(line), std::string::npos) << "reply '" << line << "' not on screen:\n"
                                                        << screen;
        ++replies;
    }
    EXPECT_EQ(replies, 2) << piped.out;
    const auto t = turn_stats(chat.err());
    ASSERT_EQ(t.size(), 2u) << chat.err();
    expect_incremental(t);
}

TEST(CliChatTmux, CtrlDEndsTheConversation) {
    TmuxChat chat({"-m", shared_path(kStories), "-t", "1", "--temp", "0", "-n", "4"});
    ASSERT_TRUE(chat.wait_prompts(1)) << chat.screen() << chat.err();
    chat.keys("C-d");
    EXPECT_EQ(chat.wait_exit(), 0) << chat.screen() << chat.err();
}

TEST(CliChatTmux, CtrlCStopsAReplyThenExitsAtThePrompt) {
    // A reply that would run for minutes: no end token, a context far past the training one.
    TmuxChat chat(
        {"-m", shared_path(kStories), "-t", "1", "--temp", "0", "--ignore-eos", "-c", "60000"});
    ASSERT_TRUE(chat.wait_prompts(1)) << chat.screen() << chat.err();
    chat.type_line("Once upon a time");
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    EXPECT_EQ(TmuxChat::count_prompts(chat.screen()), 1) << "the reply ended by itself";
    chat.keys("C-c");
    ASSERT_TRUE(chat.wait_prompts(2)) << chat.screen() << chat.err();
    EXPECT_NE(chat.err().find("(reply stopped by Ctrl-C)"), std::string::npos) << chat.err();
    const auto t = turn_stats(chat.err());
    ASSERT_EQ(t.size(), 1u) << chat.err();
    EXPECT_GT(t[0].n_reply, 20);
    chat.keys("C-c");
    EXPECT_EQ(chat.wait_exit(), 130) << chat.screen() << chat.err();
}

// `specula run` in a terminal ends the text's line on stdout (piped, stdout is exactly the
// generated bytes: test_cli), so what follows starts on a line of its own.
TEST(CliChatTmux, RunEndsItsLineInATerminal) {
    TmuxChat run({"-m", shared_path(kStories), "-t", "1", "--temp", "0", "-n", "12", "-q", "-p",
                  "Once upon a time"},
                 "run", "printf '[next]'");
    ASSERT_EQ(run.wait_exit(), 0) << run.screen() << run.err();
    const ProcResult piped = run_specula({"run", "-m", shared_path(kStories), "-t", "1", "--temp",
                                          "0", "-n", "12", "-q", "-p", "Once upon a time"});
    ASSERT_EQ(piped.status, 0) << describe(piped);
    ASSERT_FALSE(piped.out.empty());
    EXPECT_NE(piped.out.back(), '\n');
    const std::string screen = run.screen();
    EXPECT_NE(screen.find(piped.out + "\n[next]"), std::string::npos) << screen;
}

}  // namespace
