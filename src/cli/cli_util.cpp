// Helpers for the subcommands (see cli_util.h).
#include "cli/cli_util.h"

#include <charconv>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/error.h"

namespace specula::cli {

namespace {
bool g_log_enabled = true;
}

void log_set_enabled(bool enabled) {
    g_log_enabled = enabled;
}

bool log_enabled() {
    return g_log_enabled;
}

void log(const char* fmt, ...) {
    if (!g_log_enabled) return;
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    std::fputc('\n', stderr);
}

uint64_t parse_seed(const std::string& text, bool allow_random) {
    if (allow_random && text == "-1") return 0xFFFFFFFFu;
    uint64_t v = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, v);
    if (text.empty() || ec != std::errc() || ptr != end)
        fail("--seed must be ", allow_random ? "-1 (random) or " : "",
             "a whole number in [0, 18446744073709551615], got '", text, "'");
    return v;
}

// Reads at most kMaxTextFileBytes from `in` (one byte more tells an oversized file apart).
static std::string read_bounded(std::istream& in, const std::string& name) {
    std::string out;
    char buf[1 << 16];
    while (in) {
        in.read(buf, sizeof buf);
        out.append(buf, size_t(in.gcount()));
        if (out.size() > kMaxTextFileBytes)
            fail(name, ": larger than the limit of ", kMaxTextFileBytes,
                 " bytes for a text file (a prompt this long cannot fit any context)");
    }
    if (in.bad()) fail(name, ": read error");
    return out;
}

std::string read_text_file(const std::string& path) {
    if (path == "-") return read_bounded(std::cin, "-f -: standard input");  // as llama.cpp's tools
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) fail(path, ": is a directory, not a file");
    std::ifstream f(path, std::ios::binary);
    if (!f) fail(path, ": cannot open file");
    return read_bounded(f, path);
}

std::string resolve_prompt(const std::string& text, const std::string& file, bool strip_newline) {
    if (file.empty()) return text;
    if (!text.empty()) fail("give the prompt either with -p or with -f, not both");
    std::string s = read_text_file(file);
    if (strip_newline && !s.empty() && s.back() == '\n') s.pop_back();
    return s;
}

std::string process_escapes(const std::string& text) {
    const auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '\\' || i + 1 == text.size()) {
            out += text[i];
            continue;
        }
        const char c = text[i + 1];
        if (c != '\0' && std::strchr("nrt'\"\\", c) != nullptr) {
            out += c == 'n' ? '\n' : c == 'r' ? '\r' : c == 't' ? '\t' : c;
            ++i;
        } else if (c == 'x' && i + 3 < text.size() && hex(text[i + 2]) >= 0 &&
                   hex(text[i + 3]) >= 0) {
            out += static_cast<char>(hex(text[i + 2]) * 16 + hex(text[i + 3]));
            i += 3;
        } else {
            out += text[i];  // the backslash; the next character is copied as it is
        }
    }
    return out;
}

}  // namespace specula::cli
