// UTF-8 and byte-alphabet helpers for the tokenizers. Decoding follows llama.cpp: a malformed
// sequence becomes U+FFFD and costs one byte, so every input has a well-defined codepoint list.
// The GPT-2 byte alphabet maps each of the 256 byte values to one printable codepoint (the
// printable Latin-1 bytes map to themselves, the rest to U+0100 upward, in byte order).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace specula::unicode {

constexpr uint32_t kReplacement = 0xFFFD;

// Bytes in the UTF-8 sequence that `lead` starts, by its high nibble as llama.cpp counts them
// (1 for ASCII and continuation bytes, 4 for 0xF0..0xFF).
size_t utf8_len(uint8_t lead);

// Codepoints of `s`; malformed sequences, surrogates and values above U+10FFFF become U+FFFD.
std::vector<uint32_t> decode_utf8(std::string_view s);

// Appends the UTF-8 encoding of `cp` (which must be a valid scalar value).
void append_utf8(std::string& out, uint32_t cp);
std::string encode_utf8(uint32_t cp);

// White_Space property for codepoints >= 0x80 (U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028,
// U+2029, U+202F, U+205F, U+3000), the non-ASCII spaces llama.cpp's pre-tokenizer treats as \s.
bool is_non_ascii_space(uint32_t cp);

// GPT-2 byte alphabet: the codepoint that stands for `byte`, and the byte a codepoint stands for
// (-1 when the codepoint is not in the alphabet).
uint32_t byte_to_cpt(uint8_t byte);
int cpt_to_byte(uint32_t cp);

}  // namespace specula::unicode
