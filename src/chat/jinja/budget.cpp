// The render's budgets (interpreter.h's Limits) counted and enforced: steps (with the polling
// of the cancellation callback), bytes allocated, loop iterations, and the size of any one
// string or list. Each refusal is an Error naming the limit.
#include <string>

#include "chat/jinja/interpreter.h"

namespace specula::jinja {

void Interpreter::tick(size_t n) {
    steps_ += n;
    if (steps_ > limits_.max_steps)
        error("evaluation budget of " + std::to_string(limits_.max_steps) +
              " steps exhausted (the limit per render)");
    if (steps_ >= next_poll_) {
        next_poll_ = steps_ + kPollSteps;
        if (cancelled_ && cancelled_()) error("render cancelled (the client went away)");
    }
}

void Interpreter::charge(size_t bytes) {
    bytes_ += bytes;
    if (bytes_ > limits_.max_bytes)
        error("allocated more than " + std::to_string(limits_.max_bytes) +
              " bytes of strings and lists (the limit per render)");
}

void Interpreter::count_iteration() {
    if (++iterations_ > limits_.max_iterations)
        error("more than " + std::to_string(limits_.max_iterations) +
              " loop iterations (the limit per render)");
    tick();
}

void Interpreter::check_size(size_t bytes) const {
    if (bytes > limits_.max_output)
        error("string longer than the limit of " + std::to_string(limits_.max_output) + " bytes");
}

void Interpreter::check_items(size_t items) const {
    if (items > limits_.max_items)
        error("list longer than the limit of " + std::to_string(limits_.max_items) + " items");
}

}  // namespace specula::jinja
