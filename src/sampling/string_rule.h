// StringRule: what a JSON-schema string node's `minLength`, `maxLength`, `pattern` and `format`
// admit, compiled for GrammarState (grammar_state.h), which feeds it the string's decoded code
// points (an escape such as \n or \u00e9 is one code point, so is a raw UTF-8 character).
//
// The pattern is an ECMAScript regular expression with JSON Schema's search semantics (it matches
// anywhere in the string unless anchored with ^ / $). The supported subset: literal characters,
// escapes (\d \w \s \D \W \S \n \r \t \f \v \0 \xHH \uXXXX, a backslash before any other ASCII
// character that is not a letter or digit), classes [a-z0-9_] and [^...], `.`, groups (...) and
// (?:...), alternation |, quantifiers * + ? {n} {n,} {n,m} (lazy forms too: same language), ^ at
// the start and $ at the end of a top-level alternative. Anything else (backreferences,
// lookaround, \b, \p{..}, named groups, anchors elsewhere) is refused with a specula::Error naming
// the construct. `format` is one of date, time, date-time, uuid, as built-in patterns (see
// string_rule.cpp); others are refused by name.
//
// The pattern becomes a position (Glushkov) automaton: a state is the bit set of positions just
// matched (at most kMaxPositions after counted repetitions are expanded, plus one bit for "nothing
// read yet"), so it fits one 64-bit word of a GrammarState frame. A whole pattern ^X{n,m}$ with X
// one class (e.g. ^[a-z0-9 ]{1,100}$) becomes X* within n..m code points, so its count costs no
// positions. A table, per code-point count and position, of the fewest bytes that complete the
// string within the length limits trims the automaton: a state is only ever entered when it can
// still end in an admitted string (no dead ends), and it gives GrammarState::min_remaining() its
// exact value. The table has a row per count up to maxLength (or minLength when there is no
// maxLength); schemas needing more than kMaxTableCells cells are refused.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

namespace specula {

struct StringRule {
    static constexpr int kMaxPositions = 63;
    static constexpr size_t kMaxTableCells = size_t(1) << 20;
    static constexpr uint32_t kInf = UINT32_MAX;
    using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // sorted, disjoint, inclusive

    int32_t min_length = 0, max_length = -1;  // in code points; -1: unbounded
    int start = 0;                            // the "nothing read" position (after the real ones)
    std::vector<Ranges> classes;              // per real position: the code points it matches
    std::array<uint64_t, 64> follow{};        // positions that may come next, per position
    uint64_t last = 0;                        // positions after which the pattern has matched
    // Positions that match every code point, repeat and accept (a trailing .* of a search, or
    // no pattern at all), and accepting positions one of them may follow: once the state holds
    // one, any string content follows, up to maxLength.
    uint64_t free = 0;
    // States from which any code point keeps a position that matches every code point and
    // repeats (the leading .* of an unanchored search, before it has matched): with no maxLength,
    // any string content may follow and the string can still be completed.
    uint64_t open = 0;
    uint32_t rows = 0;           // counts >= rows - 1 use the last row
    std::vector<uint32_t> dist;  // rows x (start + 1): bytes to complete, or kInf

    uint32_t rest(uint64_t state, uint32_t count) const;  // fewest bytes to complete (no quote)
    // After reading code point cp: the trimmed next state, 0 when cp is refused.
    uint64_t next(uint64_t state, uint32_t count, uint32_t cp) const;
    // The fewest bytes completing the string after one code point in [lo, hi] (whose own bytes are
    // not counted), kInf when none of them can come next.
    uint32_t rest_after(uint64_t state, uint32_t count, uint32_t lo, uint32_t hi) const;
    bool can_close(uint64_t state, uint32_t count) const { return rest(state, count) == 0; }
    uint64_t initial() const { return uint64_t(1) << start; }
    bool free_run(uint64_t state) const { return (state & free) != 0; }
    bool open_run(uint64_t state) const { return max_length < 0 && (state & open) != 0; }
};

// Compiles the string keywords of schema object `s` at JSON pointer `ptr` (for errors). Throws
// specula::Error naming the keyword, the construct and the pointer.
StringRule compile_string_rule(const nlohmann::json& s, const std::string& ptr);

}  // namespace specula
