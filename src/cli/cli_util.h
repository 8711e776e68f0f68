// Small helpers shared by the subcommands: stderr logging that --log-disable silences, reading a
// prompt from -p or -f, human-readable sizes and a wall-clock timer.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/clock.h"
#include "common/format.h"

namespace specula::cli {

// printf-style line to stderr, unless logging is disabled. Never touches stdout.
void log_set_enabled(bool enabled);
bool log_enabled();
[[gnu::format(printf, 1, 2)]] void log(const char* fmt, ...);

// Whole file as bytes (path "-": standard input); throws Error naming the path when it cannot be
// read, is a directory or is larger than kMaxTextFileBytes (so `-f /dev/zero` stops at the limit
// with an error instead of reading without bound).
constexpr size_t kMaxTextFileBytes = size_t(64) << 20;
std::string read_text_file(const std::string& path);

// A --seed value: "-1" (random: llama.cpp's LLAMA_DEFAULT_SEED, when allow_random) or a whole
// number in 0 .. 2^64 - 1, all of it used (never clamped); anything else is an Error.
uint64_t parse_seed(const std::string& text, bool allow_random);

// The prompt text: the contents of `file` when given (then `text` must be empty), else `text`.
// strip_newline: one trailing newline of the file (or stdin, "-") is dropped, as llama-cli's -f
// does (run, chat); tokenize keeps the bytes as they are.
std::string resolve_prompt(const std::string& text, const std::string& file,
                           bool strip_newline = true);

// llama-cli's escape processing (its -e, on by default): \n \r \t \' \" \\ become their
// characters and \xHH (two hex digits) the byte HH; any other backslash is kept as it is.
std::string process_escapes(const std::string& text);

class Timer {
  public:
    Timer() : t0_(clock_type::now()) {}
    double ms() const { return ms_since(t0_); }

  private:
    clock_type::time_point t0_;
};

}  // namespace specula::cli
