// Runs the built `specula` binary as a child process for the CLI tests (test_cli*): stdin from a
// file, stdout and stderr captured separately, the exit status (128 + signal when killed).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace specula::test {

inline std::string specula_binary() {
    return std::string(SPECULA_BINARY_DIR) + "/bin/specula";
}

struct ProcResult {
    std::string out, err;
    int status = -1;       // exit code, or 128 + signal
    long max_rss_kib = 0;  // the child's peak resident set (getrusage's ru_maxrss)
};

// Runs bin/specula with `args` and stdin from `stdin_path`, reading stdout and stderr
// concurrently until both close.
inline ProcResult run_specula(const std::vector<std::string>& args,
                              const std::string& stdin_path = "/dev/null") {
    const std::string bin = specula_binary();
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(bin.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);

    int out_pipe[2], err_pipe[2];
    if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, stdin_path.c_str(), O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) {
        posix_spawn_file_actions_addclose(&fa, fd);
    }
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out_pipe[1]);
    close(err_pipe[1]);
    if (rc != 0) throw std::runtime_error("cannot start " + bin);

    ProcResult r;
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    std::string* sinks[2] = {&r.out, &r.err};
    int open_fds = 2;
    while (open_fds > 0) {
        if (poll(fds, 2, -1) < 0) continue;
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[4096];
            const ssize_t n = read(fds[i].fd, buf, sizeof buf);
            if (n > 0) {
                sinks[i]->append(buf, static_cast<size_t>(n));
            } else {
                close(fds[i].fd);
                fds[i].fd = -1;
                --open_fds;
            }
        }
    }
    int wstatus = 0;
    rusage ru{};
    wait4(pid, &wstatus, 0, &ru);
    r.max_rss_kib = ru.ru_maxrss;
    r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    return r;
}

// The Vulkan device the GPU tests name with --device (-ngl alone never picks a software one): the
// software device (VkPhysicalDeviceType CPU: lavapipe, as in CI) when `specula info --devices`
// lists one, else Vulkan0.
inline std::string test_vulkan_device() {
    const ProcResult r = run_specula({"info", "--devices"});
    size_t at = r.out.find(" (CPU, ");
    if (at == std::string::npos) return "Vulkan0";
    const size_t line = r.out.rfind('\n', at);
    const size_t start = line == std::string::npos ? 0 : line + 1;
    return r.out.substr(start, r.out.find(':', start) - start);
}

}  // namespace specula::test
