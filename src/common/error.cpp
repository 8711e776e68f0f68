// escape_control_bytes: see error.h.
#include "common/error.h"

namespace specula {

std::string escape_control_bytes(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    static const char hex[] = "0123456789abcdef";
    for (unsigned char c : s) {
        if (c < 0x20 || c == 0x7f) {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += char(c);
        }
    }
    return out;
}

}  // namespace specula
