// Internal to GrammarState (grammar_state.cpp, grammar_state_bounds.cpp): the frame kinds and
// sub-states, as the comment at the top of grammar_state.cpp describes them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace specula::grammar_detail {

enum Kind : uint8_t { kRoot, kObject, kArray, kString, kKey, kNumber, kLiteral };
enum ObjSub : uint8_t { kObjStart, kObjAfterKey, kObjBeforeValue, kObjAfterValue, kObjNeedKey };
enum ArrSub : uint8_t { kArrStart, kArrAfterValue, kArrBeforeValue };
enum StrSub : uint8_t { kStrPlain, kStrEscape, kStrHex0, kStrHex3 = kStrHex0 + 3, kStrUtf8 };
enum NumSub : uint8_t {
    kNumStart,
    kNumMinus,
    kNumZero,
    kNumInt,
    kNumDot,
    kNumFrac,
    kNumE,
    kNumESign,
    kNumExp
};
enum KeyMode : uint8_t { kKeyMatch, kKeyFree };

constexpr uint32_t kAdditional = 0xFFFFFFFFu;

inline const std::vector<std::string>& builtin_literals() {
    static const std::vector<std::string> v = {"false", "null", "true"};  // sorted
    return v;
}

inline bool number_terminal(uint8_t sub) {
    return sub == kNumZero || sub == kNumInt || sub == kNumFrac || sub == kNumExp;
}

}  // namespace specula::grammar_detail
