// format_bytes / format_count: see format.h.
#include "common/format.h"

#include <cstdio>

namespace specula {

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

}  // namespace specula
