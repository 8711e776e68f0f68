// Sizes and counts as the CLI and the logs print them.
#pragma once

#include <cstdint>
#include <string>

namespace specula {

// "1.23 MiB" style (binary units; "512 B" below 1 KiB).
std::string format_bytes(uint64_t bytes);

// "292.80 K" / "946.32 M" / "7.24 B" style count.
std::string format_count(int64_t n);

}  // namespace specula
