// UTF-8 helpers that reproduce the JavaScript string behaviour @huggingface/jinja relies on:
// JS's /\s/ whitespace set (ASCII and Unicode spaces, line terminators, BOM), trim/trimStart/
// trimEnd over it, the UTF-16 length JS reports, code-point splitting (Array.from) and case
// mapping (toUpperCase/toLowerCase) for Latin, Greek and Cyrillic letters (others are kept).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace specula::jinja {

// Bytes of the JS-whitespace character at s[i], 0 when s[i] does not start one.
size_t whitespace_len(std::string_view s, size_t i);
// Bytes of the (possibly malformed) UTF-8 sequence starting at s[i]; at least 1.
size_t utf8_len(std::string_view s, size_t i);
// Bytes of the whitespace character that ends at s[end) (looking back), 0 when none.
size_t whitespace_len_before(std::string_view s, size_t end);

std::string trim(std::string_view s);
std::string trim_start(std::string_view s);
std::string trim_end(std::string_view s);

// Length as JavaScript counts it (UTF-16 code units).
size_t utf16_length(std::string_view s);
// The code points of `s`, each as its UTF-8 bytes (JavaScript's Array.from(string)).
std::vector<std::string> code_points(std::string_view s);
// Decodes the code point at s[i] (malformed bytes decode as themselves).
unsigned decode_utf8(std::string_view s, size_t i, size_t* len);
void append_utf8(std::string& out, unsigned cp);

std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);
inline bool is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace specula::jinja
