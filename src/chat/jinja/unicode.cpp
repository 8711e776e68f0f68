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

std::string ascii_upper(std::string_view s) {
    std::string r(s);
    for (char& c : r)
        if (c >= 'a' && c <= 'z') c = char(c - 32);
    return r;
}

std::string ascii_lower(std::string_view s) {
    std::string r(s);
    for (char& c : r)
        if (c >= 'A' && c <= 'Z') c = char(c + 32);
    return r;
}

}  // namespace specula::jinja
