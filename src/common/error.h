// specula::Error: the one exception type the library throws for bad input (a malformed file, an
// unsupported type, a context overflow). Its message is one line that names the file, field or
// limit at fault; the CLI prints it and exits non-zero, the server turns it into a 4xx answer.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace specula {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// fail("tensor ", name, ": offset ", off, " outside the file") throws Error with the pieces joined.
template <class... Args>
[[noreturn]] void fail(Args&&... args) {
    std::ostringstream os;
    (os << ... << std::forward<Args>(args));
    throw Error(os.str());
}

}  // namespace specula
