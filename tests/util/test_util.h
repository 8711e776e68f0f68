// Shared helpers for tests: where ../shared is, and reading its files. A missing file fails the
// test with its full path (never a skip).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "common/env.h"

namespace specula::test {

// True in the sanitizer build (scripts/test.sh's second pass). Tests that repeat one check over
// many sizes for a numeric property (pass and thread invariance) run a few of them there: the
// Release pass runs them all, and the sanitizers look for memory errors, which the loops of the
// sizes kept already reach.
#ifdef SPECULA_TESTS_SANITIZED
constexpr bool kSanitizedBuild = true;
#else
constexpr bool kSanitizedBuild = false;
#endif

inline std::string shared_dir() {
    return env_value("SPECULA_SHARED_DIR").value_or(SPECULA_SHARED_DIR_DEFAULT);
}

// Full path of a file under ../shared; throws (failing the test) when it does not exist.
inline std::string shared_path(const std::string& rel) {
    std::string p = shared_dir() + "/" + rel;
    if (!std::filesystem::exists(p)) {
        throw std::runtime_error("missing test data file: " + p +
                                 " (set SPECULA_SHARED_DIR to the shared/ folder)");
    }
    return p;
}

inline std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + path);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// The directories temp_dir made, removed when the test process exits (by the process that made
// them: a forked child that exits leaves them to its parent). A crashed test leaves its own.
class TempDirs {
  public:
    void add(const std::filesystem::path& p) {
        for (const auto& d : dirs_)
            if (d == p) return;
        dirs_.push_back(p);
    }
    ~TempDirs() {
        if (::getpid() != owner_) return;
        std::error_code ec;
        for (const auto& d : dirs_) std::filesystem::remove_all(d, ec);
    }

  private:
    pid_t owner_ = ::getpid();
    std::vector<std::filesystem::path> dirs_;
};
inline TempDirs& temp_dirs() {
    static TempDirs dirs;
    return dirs;
}

// A fresh temporary directory for files a test writes (corrupted GGUF copies, ...), removed with
// its contents when the test process exits.
inline std::string temp_dir(const std::string& tag) {
    auto p = std::filesystem::temp_directory_path() /
             ("specula-test-" + tag + "-" + std::to_string(::getpid()));
    std::filesystem::create_directories(p);
    temp_dirs().add(p);
    return p.string();
}

}  // namespace specula::test
