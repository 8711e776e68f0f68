// specula::Error: the one exception type the library throws for bad input (a malformed file, an
// unsupported type, a context overflow). Its message is one line that names the file, field or
// limit at fault; the CLI prints it and exits non-zero, the server turns it into a 4xx answer.
// Control bytes in the message (a GGUF key or tensor name can hold any byte) are written as
// \xNN, so a hostile file cannot break the line or send escape sequences to a terminal.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace specula {

// `s` with each byte below 0x20 and 0x7f (DEL) written as \xNN.
std::string escape_control_bytes(const std::string& s);

class Error : public std::runtime_error {
  public:
    explicit Error(const std::string& what) : std::runtime_error(escape_control_bytes(what)) {}
    explicit Error(const char* what) : Error(std::string(what)) {}
};

// fail("tensor ", name, ": offset ", off, " outside the file") throws Error with the pieces joined.
template <class... Args>
[[noreturn]] void fail(Args&&... args) {
    std::ostringstream os;
    (os << ... << std::forward<Args>(args));
    throw Error(os.str());
}

}  // namespace specula
