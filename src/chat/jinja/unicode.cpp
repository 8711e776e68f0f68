#include "chat/jinja/unicode.h"

namespace specula::jinja {

unsigned decode_utf8(std::string_view s, size_t i, size_t* len) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = 1;
    unsigned cp = c;
    if (c >= 0xc0 && c < 0xe0) {
        n = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c < 0xf0) {
        n = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c < 0xf8) {
        n = 4;
        cp = c & 0x07;
    }
    if (n > 1) {
        if (i + n > s.size()) {
            *len = 1;
            return c;
        }
        for (size_t k = 1; k < n; ++k) {
            const unsigned char d = static_cast<unsigned char>(s[i + k]);
            if ((d & 0xc0) != 0x80) {
                *len = 1;
                return c;
            }
            cp = (cp << 6) | (d & 0x3f);
        }
    }
    *len = n;
    return cp;
}

size_t utf8_len(std::string_view s, size_t i) {
    size_t n = 1;
    decode_utf8(s, i, &n);
    return n;
}

void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xc0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out += char(0xe0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3f));
        out += char(0x80 | (cp & 0x3f));
    } else {
        out += char(0xf0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3f));
        out += char(0x80 | ((cp >> 6) & 0x3f));
        out += char(0x80 | (cp & 0x3f));
    }
}

static bool is_js_space(unsigned cp) {
    if (cp <= 32) return cp == 32 || (cp >= 9 && cp <= 13);
    return cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000 || cp == 0xfeff;
}

size_t whitespace_len(std::string_view s, size_t i) {
    if (i >= s.size()) return 0;
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) return is_js_space(c) ? 1 : 0;
    size_t n = 1;
    const unsigned cp = decode_utf8(s, i, &n);
    return n > 1 && is_js_space(cp) ? n : 0;
}

size_t whitespace_len_before(std::string_view s, size_t end) {
    if (end == 0) return 0;
    if (static_cast<unsigned char>(s[end - 1]) < 0x80) return is_js_space(s[end - 1]) ? 1 : 0;
    for (size_t n = 2; n <= 3 && n <= end; ++n)  // Unicode spaces are 2 or 3 bytes long
        if (whitespace_len(s, end - n) == n) return n;
    return 0;
}

std::string trim_start(std::string_view s) {
    size_t i = 0;
    while (size_t n = whitespace_len(s, i)) i += n;
    return std::string(s.substr(i));
}

std::string trim_end(std::string_view s) {
    size_t e = s.size();
    while (size_t n = whitespace_len_before(s, e)) e -= n;
    return std::string(s.substr(0, e));
}

std::string trim(std::string_view s) {
    return trim_end(trim_start(s));
}

size_t utf16_length(std::string_view s) {
    size_t units = 0;
    for (size_t i = 0; i < s.size();) {
        size_t n = 1;
        const unsigned cp = decode_utf8(s, i, &n);
        units += cp >= 0x10000 ? 2 : 1;
        i += n;
    }
    return units;
}

std::vector<std::string> code_points(std::string_view s) {
    std::vector<std::string> out;
    for (size_t i = 0; i < s.size();) {
        const size_t n = utf8_len(s, i);
        out.emplace_back(s.substr(i, n));
        i += n;
    }
    return out;
}

namespace {

// Simple case mapping for Latin-1, Latin Extended-A, Greek and Cyrillic (what JavaScript's
// toUpperCase/toLowerCase do there); other code points map to themselves.
unsigned upper_cp(unsigned c) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if (c < 0x80) return c;
    if ((c >= 0xe0 && c <= 0xfe && c != 0xf7)) return c - 32;
    if (c == 0xff) return 0x178;
    if (c == 0xb5) return 0x39c;
    if (c >= 0x100 && c <= 0x17f && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 &&
        c != 0x17f) {
        const bool odd_pairs = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
        if (odd_pairs ? (c % 2 == 0) : (c % 2 == 1)) return c - 1;
        return c;
    }
    if (c == 0x17f) return 'S';
    if (c >= 0x3b1 && c <= 0x3c9) return c == 0x3c2 ? 0x3a3 : c - 32;
    if (c >= 0x430 && c <= 0x44f) return c - 32;
    if (c >= 0x450 && c <= 0x45f) return c - 80;
    return c;
}

unsigned lower_cp(unsigned c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c < 0x80) return c;
    if (c >= 0xc0 && c <= 0xde && c != 0xd7) return c + 32;
    if (c == 0x178) return 0xff;
    if (c >= 0x100 && c <= 0x17f && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 &&
        c != 0x17f) {
        const bool odd_pairs = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
        if (odd_pairs ? (c % 2 == 1) : (c % 2 == 0)) return c + 1;
        return c;
    }
    if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 32;
    if (c >= 0x410 && c <= 0x42f) return c + 32;
    if (c >= 0x400 && c <= 0x40f) return c + 80;
    return c;
}

std::string map_case(std::string_view s, bool upper) {
    std::string r;
    r.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        const unsigned char b = static_cast<unsigned char>(s[i]);
        if (b < 0x80) {
            r += char(upper ? upper_cp(b) : lower_cp(b));
            ++i;
            continue;
        }
        size_t n = 1;
        const unsigned cp = decode_utf8(s, i, &n);
        if (n == 1) {  // a malformed byte stays as it is
            r += s[i++];
            continue;
        }
        if (upper && cp == 0xdf) {
            r += "SS";
        } else {
            append_utf8(r, upper ? upper_cp(cp) : lower_cp(cp));
        }
        i += n;
    }
    return r;
}

}  // namespace

std::string to_upper(std::string_view s) {
    return map_case(s, true);
}
std::string to_lower(std::string_view s) {
    return map_case(s, false);
}

}  // namespace specula::jinja
