// Private to sampling/'s StringRule (string_rule.cpp): the `pattern` (or a built-in `format`'s
// pattern) of a JSON-schema string node, parsed into a small tree of code-point classes,
// sequences, alternations and counted repetitions (the ECMAScript subset string_rule.h lists;
// anything else throws specula::Error naming the construct, the keyword and the schema path), and
// the code-point range helpers the automaton built from that tree needs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace specula::pattern {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // sorted, disjoint, inclusive

constexpr uint32_t kMaxCp = 0x10FFFF;
constexpr uint32_t kNoBytes = UINT32_MAX;  // min_bytes of a class JSON cannot write

struct Re {
    enum Kind { kClass, kCat, kAlt, kRep } kind = kCat;
    Ranges cls;
    std::vector<Re> kids;
    int min = 0, max = 0;  // kRep; max -1: unbounded
};

Re node(Re::Kind k);
Re klass(Ranges cls);

// The pattern as an alternation (kAlt) of top-level alternatives, each a sequence (kCat) whose
// unanchored ends are any-code-point repetitions (JSON Schema's search semantics). ptr and keyword
// ("pattern" or "format") name the node in errors.
Re parse_pattern(const std::string& pattern, const std::string& ptr, const char* keyword);

// Code points a JSON string can hold: no surrogates (GrammarState never produces them).
Ranges without_surrogates(const Ranges& r);
// Whether r holds a code point in [lo, hi].
bool has(const Ranges& r, uint32_t lo, uint32_t hi);
// The fewest bytes of JSON string content that write one code point of r (kNoBytes: none).
uint32_t min_bytes(const Ranges& r);

}  // namespace specula::pattern
