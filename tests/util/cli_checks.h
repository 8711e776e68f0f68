// What the CLI tests (tests/cli/test_cli*) check a finished `specula` process by: a readable dump
// of it for failure messages, the one clean error line the CLI promises for bad input, and the
// line of a log that names a key.
#pragma once

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "cli_process.h"
#include "test_util.h"

namespace specula::test {

inline const std::string kStoriesRel = "models/tinystories/stories260K.gguf";

// The tiny pair the CLI tests run: stories260K and llama2xs (one vocabulary).
inline std::string stories() {
    return shared_path(kStoriesRel);
}
inline std::string llama2xs() {
    return shared_path("models/tinystories/llama2xs.gguf");
}

inline std::string describe(const ProcResult& r) {
    return "status " + std::to_string(r.status) + "\n--- stdout ---\n" + r.out +
           "\n--- stderr ---\n" + r.err;
}

// A failure as the CLI promises it: status 1, nothing on stdout, one `error: ` line on stderr.
inline void expect_clean_error(const ProcResult& r, const std::string& must_contain) {
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_EQ(r.out, "") << describe(r);
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << describe(r);
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not exactly one line: " << describe(r);
    EXPECT_NE(r.err.find(must_contain), std::string::npos)
        << "expected '" << must_contain << "' in: " << r.err;
}

// The line of `text` that contains `key` ("" if none).
inline std::string line_with(const std::string& text, const std::string& key) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.find(key) != std::string::npos) return line;
    }
    return "";
}

}  // namespace specula::test
