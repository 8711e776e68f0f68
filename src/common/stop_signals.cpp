// exit_on_stop_signals / forward_stop_signals: see stop_signals.h. The handler either writes a
// prepared line and _exit()s, or writes the signal number to a pipe read by the forwarding
// thread; which one is decided by one atomic flag, so a signal is never lost between the two.
#include "common/stop_signals.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include "common/error.h"

namespace specula {

namespace {

char g_line_int[256], g_line_term[256];  // "<who>: SIGINT <phase>, exiting\n"
std::atomic<bool> g_forward{false};
int g_pipe[2] = {-1, -1};

void on_stop_signal(int sig) {
    const int saved_errno = errno;
    if (g_forward.load()) {
        const unsigned char b = static_cast<unsigned char>(sig);
        ssize_t n = ::write(g_pipe[1], &b, 1);
        (void)n;
        errno = saved_errno;
        return;
    }
    const char* line = sig == SIGINT ? g_line_int : g_line_term;
    ssize_t n = ::write(STDERR_FILENO, line, std::strlen(line));
    (void)n;
    ::_exit(128 + sig);
}

void format_line(char* out, size_t size, const char* who, const char* name, const char* phase) {
    std::snprintf(out, size, "%s: %s%s%s, exiting\n", who, name, *phase ? " " : "", phase);
}

}  // namespace

void exit_on_stop_signals(const char* who, const char* phase) {
    format_line(g_line_int, sizeof g_line_int, who, "SIGINT", phase);
    format_line(g_line_term, sizeof g_line_term, who, "SIGTERM", phase);
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // other threads' reads and writes are not cut short
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);  // a pending signal is handled here, at once
}

void forward_stop_signals(std::function<void(int)> on_signal) {
    if (::pipe(g_pipe) != 0) fail("cannot create the signal pipe: ", std::strerror(errno));
    std::thread([fd = g_pipe[0], on_signal = std::move(on_signal)] {
        unsigned char b = 0;
        for (;;) {
            const ssize_t n = ::read(fd, &b, 1);
            if (n == 1) {
                on_signal(b);
            } else if (n < 0 && errno == EINTR) {
                continue;
            } else {
                return;
            }
        }
    }).detach();  // started with the signals unblocked: there is always a thread to take them
    g_forward.store(true);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);  // threads started from here on keep their calls
}

}  // namespace specula
