// SIGINT / SIGTERM for the commands (`run`, `serve`): a signal stops the process promptly
// whatever it is doing, loading a model included, with one clear line on stderr.
//
//   exit_on_stop_signals("serve", "while loading the model");   // first thing in the command
//   ... load models, build the server ...
//   forward_stop_signals([&](int sig) { server.stop(); });        // from now on: a clean stop
//
// Until forward_stop_signals() is called, a signal prints "<who>: SIGTERM <phase>, exiting" and
// exits with status 128 + the signal number (143 for SIGTERM, 130 for SIGINT). After it, each
// signal calls the function on a thread of its own (not in a signal handler), so it may take
// locks and stop servers. The handler itself only calls async-signal-safe functions, and runs
// on whichever thread the kernel picks: nothing depends on signal masks, so threads started
// while loading (thread pools) need no care. A signal that is pending when the process starts
// (blocked across exec) is acted on at once.
#pragma once

#include <functional>

namespace specula {

// Installs the handlers and unblocks SIGINT and SIGTERM in the calling thread. `who` and `phase`
// must be string literals (or otherwise outlive the process); `phase` may be "".
void exit_on_stop_signals(const char* who, const char* phase);

// From now on SIGINT and SIGTERM call `on_signal(signal number)` on a dedicated thread, once per
// signal. Call at most once per process, after exit_on_stop_signals(). Blocks both signals in the
// calling thread, so that the threads it starts later (a server's) never see EINTR.
void forward_stop_signals(std::function<void(int)> on_signal);

}  // namespace specula
