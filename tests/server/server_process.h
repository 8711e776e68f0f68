// Test helper: runs `specula serve` as a child process on a free loopback port (--port 0; the
// port is read from the server's "listening on" log line), waits until GET /health answers, and
// kills the process (SIGTERM, then SIGKILL) when the object goes away, whatever the test did.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

extern char** environ;

namespace specula::test {

// The server tests' models: stories260K as the target, llama2xs (same vocabulary) as the draft.
inline std::string server_target_path() {
    return shared_path("models/tinystories/stories260K.gguf");
}
inline std::string server_draft_path() {
    return shared_path("models/tinystories/llama2xs.gguf");
}

inline std::string specula_bin() {
    return std::string(SPECULA_BINARY_DIR) + "/bin/specula";
}

class ServerProcess {
  public:
    explicit ServerProcess(const std::vector<std::string>& serve_args, const std::string& tag) {
        log_path_ = (std::filesystem::temp_directory_path() /
                     ("specula-serve-" + tag + "-" + std::to_string(::getpid()) + ".log"))
                        .string();
        std::vector<std::string> args = {specula_bin(), "serve",  "--host",
                                         "127.0.0.1",   "--port", "0"};
        args.insert(args.end(), serve_args.begin(), serve_args.end());
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                         0644);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
        const int rc = posix_spawn(&pid_, args[0].c_str(), &fa, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&fa);
        if (rc != 0) throw std::runtime_error("cannot start " + args[0]);
        wait_ready();
    }

    ~ServerProcess() { stop(); }
    ServerProcess(const ServerProcess&) = delete;
    ServerProcess& operator=(const ServerProcess&) = delete;

    int port() const { return port_; }
    pid_t pid() const { return pid_; }
    std::string log() const {
        std::ifstream f(log_path_);
        std::stringstream ss;
        ss << f.rdbuf();
        return ss.str();
    }
    httplib::Client client(int read_timeout_s = 60) const {
        httplib::Client c("127.0.0.1", port_);
        c.set_read_timeout(read_timeout_s, 0);
        c.set_connection_timeout(5, 0);
        return c;
    }

    // Stops the server; a sanitizer report in its log fails the running test.
    void stop() {
        if (pid_ <= 0) return;
        terminate();
        const std::string text = log();
        if (text.find("Sanitizer") != std::string::npos ||
            text.find("runtime error:") != std::string::npos) {
            ADD_FAILURE() << "specula serve reported an error:\n" << text;
        } else {
            std::filesystem::remove(log_path_);
        }
    }

  private:
    void terminate() {
        ::kill(pid_, SIGTERM);
        for (int i = 0; i < 100; ++i) {
            if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
                pid_ = -1;
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        ::kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }

    void wait_ready() {
        const std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+))");
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (std::chrono::steady_clock::now() < deadline) {
            int status = 0;
            if (waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                throw std::runtime_error("specula serve exited early:\n" + log());
            }
            std::smatch m;
            const std::string text = log();
            if (port_ == 0 && std::regex_search(text, m, listening)) port_ = std::stoi(m[1]);
            if (port_ != 0) {
                auto res = client(2).Get("/health");
                if (res && res->status == 200) return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        terminate();
        throw std::runtime_error("specula serve did not become healthy in 60 s:\n" + log());
    }

    pid_t pid_ = -1;
    int port_ = 0;
    std::string log_path_;
};

// A test suite whose tests share one server, started before its first test and stopped after its
// last. Suite, the fixture deriving from it, gives the server's flags and log tag as static
// server_args() and server_tag().
// A POST of a JSON body and its answer: the status, the body parsed (discarded when it is not
// JSON), its text and the headers. Throws when no answer comes.
struct JsonReply {
    int status = 0;
    nlohmann::json body;
    std::string text;
    httplib::Headers headers;
};
inline JsonReply post_json(const ServerProcess& s, const std::string& path,
                           const nlohmann::json& body) {
    auto res = s.client().Post(path.c_str(), body.dump(), "application/json");
    if (!res) throw std::runtime_error("no response from " + path);
    return {res->status, nlohmann::json::parse(res->body, nullptr, false), res->body, res->headers};
}

template <class Suite>
class SharedServerTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        server_ = std::make_unique<ServerProcess>(Suite::server_args(), Suite::server_tag());
    }
    static void TearDownTestSuite() { server_.reset(); }
    static ServerProcess& s() { return *server_; }

  private:
    static inline std::unique_ptr<ServerProcess> server_;
};

}  // namespace specula::test
