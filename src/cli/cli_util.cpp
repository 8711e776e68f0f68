// Helpers for the subcommands (see cli_util.h).
#include "cli/cli_util.h"

#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <fstream>
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

std::string read_text_file(const std::string& path) {
    if (std::filesystem::is_directory(path)) fail(path, ": is a directory, not a file");
    std::ifstream f(path, std::ios::binary);
    if (!f) fail(path, ": cannot open file");
    std::ostringstream ss;
    ss << f.rdbuf();
    if (f.bad()) fail(path, ": read error");
    return ss.str();
}

std::string resolve_prompt(const std::string& text, const std::string& file) {
    if (file.empty()) return text;
    if (!text.empty()) fail("give the prompt either with -p or with -f, not both");
    return read_text_file(file);
}

std::string format_bytes(uint64_t bytes) {
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        ++u;
    }
    char buf[32];
    if (u == 0) {
        std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
    } else {
        std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
    }
    return buf;
}

std::string format_count(int64_t n) {
    char buf[32];
    const double v = static_cast<double>(n);
    if (n >= 1000000000) {
        std::snprintf(buf, sizeof buf, "%.2f B", v / 1e9);
    } else if (n >= 1000000) {
        std::snprintf(buf, sizeof buf, "%.2f M", v / 1e6);
    } else if (n >= 1000) {
        std::snprintf(buf, sizeof buf, "%.2f K", v / 1e3);
    } else {
        std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
    }
    return buf;
}

}  // namespace specula::cli
