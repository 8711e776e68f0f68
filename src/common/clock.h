// Wall-clock timing for statistics: the steady clock and milliseconds since a point on it.
#pragma once

#include <chrono>

namespace specula {

using clock_type = std::chrono::steady_clock;

inline double ms_since(clock_type::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

}  // namespace specula
