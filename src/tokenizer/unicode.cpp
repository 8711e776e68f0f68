// UTF-8 decoding/encoding and the GPT-2 byte alphabet (see unicode.h).
#include "tokenizer/unicode.h"

#include <array>

namespace specula::unicode {

size_t utf8_len(uint8_t lead) {
    // By the high nibble, as llama.cpp splits text into symbols: 0xF8..0xFF count as 4 too.
    if (lead < 0xC0) return 1;  // ASCII, or a stray continuation byte
    if (lead < 0xE0) return 2;
    if (lead < 0xF0) return 3;
    return 4;
}

static bool is_continuation(uint8_t b) {
    return (b & 0xC0) == 0x80;
}

// Decodes the sequence at s[i]; returns its length, or 0 when it is malformed.
static size_t decode_one(std::string_view s, size_t i, uint32_t& cp) {
    const uint8_t b0 = static_cast<uint8_t>(s[i]);
    if (b0 >= 0xF8) return 0;
    const size_t n = utf8_len(b0);
    if (n == 1) {
        cp = b0;
        return b0 < 0x80 ? 1 : 0;
    }
    if (i + n > s.size()) return 0;
    uint32_t v = b0 & (0xFF >> (n + 1));
    for (size_t k = 1; k < n; ++k) {
        const uint8_t b = static_cast<uint8_t>(s[i + k]);
        if (!is_continuation(b)) return 0;
        v = (v << 6) | (b & 0x3F);
    }
    cp = v;
    return n;
}

std::vector<uint32_t> decode_utf8(std::string_view s) {
    std::vector<uint32_t> out;
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
        uint32_t cp = 0;
        const size_t n = decode_one(s, i, cp);
        if (n == 0) {
            out.push_back(kReplacement);
            ++i;
            continue;
        }
        // llama.cpp accepts overlong forms (their value is kept); values that are not Unicode
        // scalar values cannot be re-encoded and become U+FFFD.
        if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = kReplacement;
        out.push_back(cp);
        i += n;
    }
    return out;
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

std::string encode_utf8(uint32_t cp) {
    std::string s;
    append_utf8(s, cp);
    return s;
}

bool is_non_ascii_space(uint32_t cp) {
    switch (cp) {
        case 0x85:
        case 0xA0:
        case 0x1680:
        case 0x2028:
        case 0x2029:
        case 0x202F:
        case 0x205F:
        case 0x3000:
            return true;
        default:
            return cp >= 0x2000 && cp <= 0x200A;
    }
}

// Bytes that stand for themselves: '!'..'~', 0xA1..0xAC, 0xAE..0xFF.
static bool is_self_byte(int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

namespace {
struct ByteAlphabet {
    std::array<uint32_t, 256> to_cpt{};
    std::array<int16_t, 512> to_byte{};
    ByteAlphabet() {
        to_byte.fill(-1);
        uint32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            to_cpt[b] = is_self_byte(b) ? static_cast<uint32_t>(b) : next++;
            to_byte[to_cpt[b]] = static_cast<int16_t>(b);
        }
    }
};
const ByteAlphabet& alphabet() {
    static const ByteAlphabet a;
    return a;
}
}  // namespace

uint32_t byte_to_cpt(uint8_t byte) {
    return alphabet().to_cpt[byte];
}

int cpt_to_byte(uint32_t cp) {
    return cp < 512 ? alphabet().to_byte[cp] : -1;
}

}  // namespace specula::unicode
