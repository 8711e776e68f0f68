// write_bench_svg(): the draft-length sweep as an SVG chart: measured speedup (median tok/s over
// plain) and the model's speedup against the draft length N, with the `auto` row as a line.
#pragma once

#include <string>

#include "bench/sweep.h"

namespace specula {

// Throws Error when the file cannot be written.
void write_bench_svg(const BenchResult& r, const std::string& path);

}  // namespace specula
