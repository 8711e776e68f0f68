// GrammarState: see grammar_state.h. One frame per open construct: the root, each open object /
// array, and on top at most one key, string, number or literal being read. Frame fields by kind:
//   Root:    sub 0 before the value, 1 after it; v = prefix bytes matched, w = suffix bytes;
//            with alternatives, seen = range of those still matching, lo | hi << 32
//   Object:  sub (ObjSub), u = property whose value comes next (kAdditional: another key),
//            seen = bit per named property already written
//   Array:   sub (ArrSub), u = items started
//   String:  sub / aux / v = string-body state (StrSub; aux: UTF-8 bytes pending or "\u D" flag,
//            v: admitted range of the next UTF-8 byte, lo | hi << 8); with a StringRule also
//            u = code points read, w = the code point being decoded (its bits so far), aux2 = its
//            UTF-8 length, seen = the rule's automaton state
//   Key:     string-body state as String, plus aux2 = KeyMode, u..w = range of property names
//            still matching, seen = bytes matched
//   Number:  sub (NumSub), aux = digits in the current part
//   Literal: u..w = range of literal texts still matching, v = bytes matched
// Strings under a StringRule and min_remaining() are in grammar_state_bounds.cpp.
#include "sampling/grammar_state.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "sampling/grammar_state_detail.h"

namespace specula {

using namespace grammar_detail;

namespace {

// As llama.cpp's JSON grammars bound numbers: 16 integer and 16 fraction digits; the exponent
// at 2 (nlohmann refuses a number that overflows a double).
constexpr int kMaxIntDigits = 16, kMaxFracDigits = 16, kMaxExpDigits = 2;
constexpr uint8_t kWsSpace = 255;  // Frame::ws after a gap's one space

bool is_ws(uint8_t c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}
bool is_digit(uint8_t c) {
    return c >= '0' && c <= '9';
}
int hex_value(uint8_t c) {
    if (is_digit(c)) return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Narrows the sorted range [lo, hi) of `texts` to those whose byte `pos` is c. Texts equal to the
// matched prefix sort first, so the range stays contiguous.
bool narrow(const std::vector<std::string>& texts, uint32_t& lo, uint32_t& hi, size_t pos,
            uint8_t c) {
    uint32_t a = lo;
    while (a < hi && (texts[a].size() <= pos || uint8_t(texts[a][pos]) < c)) ++a;
    uint32_t b = a;
    while (b < hi && texts[b].size() > pos && uint8_t(texts[b][pos]) == c) ++b;
    if (a == b) return false;
    lo = a, hi = b;
    return true;
}

}  // namespace

GrammarState::GrammarState(std::shared_ptr<const JsonGrammar> grammar) : keep_(std::move(grammar)) {
    if (!keep_) fail("grammar state: no grammar");
    g_ = keep_.get();
    push(kRoot, g_->root).seen = uint64_t(g_->alternatives.size()) << 32;
}

const std::string& GrammarState::prefix_of(const Frame& root) const {
    return g_->alternatives.empty() ? g_->prefix : g_->alternatives[uint32_t(root.seen)].prefix;
}
const std::string& GrammarState::suffix_of(const Frame& root) const {
    return g_->alternatives.empty() ? g_->suffix : g_->alternatives[uint32_t(root.seen)].suffix;
}
int32_t GrammarState::root_of(const Frame& root) const {
    return g_->alternatives.empty() ? g_->root : g_->alternatives[uint32_t(root.seen)].root;
}

GrammarState& GrammarState::operator=(const GrammarState& o) {
    if (keep_ != o.keep_) keep_ = o.keep_;
    g_ = o.g_;
    depth_ = o.depth_;
    containers_ = o.containers_;
    n_bytes_ = o.n_bytes_;
    std::memcpy(frames_.data(), o.frames_.data(), sizeof(Frame) * size_t(depth_));
    return *this;
}

GrammarState::Frame& GrammarState::push(uint8_t kind, int32_t node) {
    Frame& f = frames_[size_t(depth_++)];
    f = Frame{};
    f.kind = kind;
    f.node = node;
    if (kind == kObject || kind == kArray) ++containers_;
    return f;
}

void GrammarState::pop() {
    const uint8_t k = top().kind;
    if (k == kObject || k == kArray) --containers_;
    --depth_;
}

// A gap between JSON tokens is what llama.cpp's grammars allow: nothing, one space, or a
// newline and at most max_ws spaces or tabs of indent. f.ws: 0 before the gap's first byte,
// kWsSpace after its one space, 1 + k after the newline and k indent bytes.
bool GrammarState::ws(Frame& f, uint8_t c) {
    if (f.ws == 0) {
        if (c != ' ' && c != '\n') return false;
        f.ws = c == ' ' ? kWsSpace : 1;
        return true;
    }
    if (f.ws == kWsSpace || (c != ' ' && c != '\t') || f.ws - 1 >= g_->options.max_ws) return false;
    ++f.ws;
    return true;
}

bool GrammarState::key_possible(const Frame& obj) const {
    const JsonNode& n = g_->nodes[size_t(obj.node)];
    if (n.additional >= 0) return true;
    const size_t np = n.prop_names.size();
    const uint64_t all = np >= 64 ? ~uint64_t(0) : (uint64_t(1) << np) - 1;
    return (obj.seen & all) != all;
}

namespace {

// The JSON type(s) whose text can start with byte c (0: none).
uint8_t json_type_starting(uint8_t c) {
    if (c == '{') return kJsonObject;
    if (c == '[') return kJsonArray;
    if (c == '"') return kJsonString;
    if (c == 'n') return kJsonNull;
    if (c == 't' || c == 'f') return kJsonBoolean;
    if (c == '-' || is_digit(c)) return kJsonNumber | kJsonInteger;
    return 0;
}

}  // namespace

bool GrammarState::start_value(int32_t node, uint8_t c) {
    const JsonNode& n = g_->nodes[size_t(node)];
    if (!n.branches.empty()) {  // the branch whose type starts with c
        const uint8_t t = json_type_starting(c);
        for (int32_t b : n.branches) {
            const JsonNode& bn = g_->nodes[size_t(b)];
            bool match = false;
            if (!bn.literals.empty()) {
                for (const std::string& l : bn.literals) match |= uint8_t(l[0]) == c;
            } else {
                match = (bn.types & t) != 0;  // (a nested union: its branches' types)
            }
            if (match) return start_value(b, c);
        }
        return false;
    }
    if (!n.literals.empty()) {
        Frame& f = push(kLiteral, node);
        f.w = uint32_t(n.literals.size());
        return step_literal(f, c) == 0;
    }
    switch (c) {
        case '{':
        case '[': {
            const bool obj = c == '{';
            if (!(n.types & (obj ? kJsonObject : kJsonArray))) return false;
            if (containers_ >= g_->options.max_depth) return false;
            Frame& f = push(obj ? kObject : kArray, node);
            f.u = obj ? kAdditional : 0;
            return true;
        }
        case '"': {
            if (!(n.types & kJsonString)) return false;
            Frame& f = push(kString, node);
            if (n.string_rule >= 0) f.seen = g_->string_rules[size_t(n.string_rule)].initial();
            return true;
        }
        case 't':
        case 'f':
        case 'n': {
            if (!(n.types & (c == 'n' ? kJsonNull : kJsonBoolean))) return false;
            Frame& f = push(kLiteral, -1);
            f.w = uint32_t(builtin_literals().size());
            return step_literal(f, c) == 0;
        }
        default:
            if (c != '-' && !is_digit(c)) return false;
            if (!(n.types & (kJsonNumber | kJsonInteger))) return false;
            return step_number(push(kNumber, node), c) == 0;
    }
}

bool GrammarState::step(uint8_t c) {
    ++n_bytes_;
    while (depth_ > 0) {
        Frame& f = top();
        int r;
        switch (f.kind) {
            case kRoot:
                return step_root(f, c);
            case kObject:
                return step_object(f, c);
            case kArray:
                return step_array(f, c);
            case kKey:
                return step_key(f, c);
            case kString:
                if (const StringRule* rule = rule_of(f))
                    r = step_rule_string(f, *rule, c);
                else
                    r = step_string_body(f, c);
                if (r == 1) pop();
                return r >= 0;
            case kNumber:
                r = step_number(f, c);
                break;
            default:
                r = step_literal(f, c);
                break;
        }
        if (r <= 0) return r == 0;
        pop();  // the number / literal ended before c: the enclosing frame reads c
    }
    return false;
}

bool GrammarState::advance(std::string_view bytes) {
    GrammarState s(*this);
    for (char c : bytes)
        if (!s.step(uint8_t(c))) return false;
    *this = s;
    return true;
}

bool GrammarState::step_root(Frame& f, uint8_t c) {
    if (f.sub != 0) {
        const std::string& suffix = suffix_of(f);
        if (f.w >= suffix.size() || uint8_t(suffix[f.w]) != c) return false;
        ++f.w;
        return true;
    }
    const auto& alts = g_->alternatives;
    uint32_t lo = uint32_t(f.seen), hi = uint32_t(f.seen >> 32);
    if (hi - lo > 1 || (!alts.empty() && f.v < alts[lo].prefix.size())) {
        // Alternatives still open: narrow the sorted range to the prefixes with byte c here
        // (prefix-free, so none of a range of several is complete yet).
        while (lo < hi && (alts[lo].prefix.size() <= f.v || uint8_t(alts[lo].prefix[f.v]) < c))
            ++lo;
        uint32_t end = lo;
        while (end < hi && alts[end].prefix.size() > f.v && uint8_t(alts[end].prefix[f.v]) == c)
            ++end;
        if (lo == end) return false;
        f.seen = uint64_t(lo) | uint64_t(end) << 32;
        ++f.v;
        return true;
    }
    if (alts.empty() && f.v < g_->prefix.size()) {
        if (uint8_t(g_->prefix[f.v]) != c) return false;
        ++f.v;
        return true;
    }
    if (is_ws(c)) return ws(f, c);
    f.sub = 1;
    return start_value(root_of(f), c);
}

bool GrammarState::step_object(Frame& f, uint8_t c) {
    const JsonNode& n = g_->nodes[size_t(f.node)];
    if (is_ws(c)) return ws(f, c);
    f.ws = 0;
    switch (f.sub) {
        case kObjStart:
        case kObjNeedKey:
            if (c == '"' && key_possible(f)) {
                const size_t np = n.prop_names.size();
                Frame& k = push(kKey, f.node);
                k.aux2 = np == 0 ? kKeyFree : kKeyMatch;
                k.w = uint32_t(np);
                return true;
            }
            if (c == '}' && f.sub == kObjStart && n.required == 0) {
                pop();
                return true;
            }
            return false;
        case kObjAfterKey:
            if (c != ':') return false;
            f.sub = kObjBeforeValue;
            return true;
        case kObjBeforeValue:
            f.sub = kObjAfterValue;
            return start_value(f.u == kAdditional ? n.additional : n.prop_nodes[f.u], c);
        default:  // kObjAfterValue
            if (c == ',' && key_possible(f)) {
                f.sub = kObjNeedKey;
                return true;
            }
            if (c == '}' && (n.required & ~f.seen) == 0) {
                pop();
                return true;
            }
            return false;
    }
}

bool GrammarState::step_array(Frame& f, uint8_t c) {
    const JsonNode& n = g_->nodes[size_t(f.node)];
    if (is_ws(c)) return ws(f, c);
    f.ws = 0;
    switch (f.sub) {
        case kArrStart:
            if (c == ']' && n.min_items == 0) {
                pop();
                return true;
            }
            if (n.max_items == 0) return false;
            [[fallthrough]];
        case kArrBeforeValue:
            ++f.u;
            f.sub = kArrAfterValue;
            return start_value(n.items, c);
        default:  // kArrAfterValue
            if (c == ',' && (n.max_items < 0 || f.u < uint32_t(n.max_items))) {
                f.sub = kArrBeforeValue;
                return true;
            }
            if (c == ']' && f.u >= uint32_t(n.min_items)) {
                pop();
                return true;
            }
            return false;
    }
}

bool GrammarState::close_key(Frame& k, uint32_t prop) {
    (void)k;
    pop();
    Frame& obj = top();
    obj.u = prop;
    if (prop != kAdditional) obj.seen |= uint64_t(1) << prop;
    obj.sub = kObjAfterKey;
    return true;
}

bool GrammarState::step_key(Frame& k, uint8_t c) {
    const JsonNode& n = g_->nodes[size_t(k.node)];
    if (k.aux2 == kKeyFree) {
        const int r = step_string_body(k, c);
        if (r == 1) return close_key(k, kAdditional);
        return r == 0;
    }
    const Frame& obj = frames_[size_t(depth_ - 2)];
    const size_t pos = size_t(k.seen);
    if (c == '"') {
        if (k.sub != kStrPlain) return false;
        if (k.u < k.w && n.prop_names[k.u].size() == pos) {
            if (obj.seen >> k.u & 1) return false;  // a duplicate key
            return close_key(k, k.u);
        }
        return n.additional >= 0 && close_key(k, kAdditional);
    }
    if (c == '\\' || step_string_body(k, c) != 0) return false;
    uint32_t lo = k.u, hi = k.w;
    if (narrow(n.prop_names, lo, hi, pos, c)) {
        if (n.additional < 0) {
            bool open = false;
            for (uint32_t i = lo; i < hi && !open; ++i) open = !(obj.seen >> i & 1);
            if (!open) return false;
        }
        k.u = lo, k.w = hi, k.seen = pos + 1;
        return true;
    }
    if (n.additional < 0) return false;
    k.aux2 = kKeyFree;  // no property name starts like this: an additional key
    return true;
}

int GrammarState::step_string_body(Frame& f, uint8_t c) {
    switch (f.sub) {
        case kStrPlain:
            if (c == '"') return 1;
            if (c == '\\') {
                f.sub = kStrEscape;
                return 0;
            }
            if (c < 0x20) return -1;
            if (c < 0x80) return 0;
            // UTF-8 lead byte: continuation count and the range of the first continuation byte
            // (no overlong forms, no surrogates, nothing above U+10FFFF).
            if (c >= 0xC2 && c <= 0xDF) {
                f.aux = 1, f.v = 0x80 | 0xBF << 8;
            } else if (c == 0xE0) {
                f.aux = 2, f.v = 0xA0 | 0xBF << 8;
            } else if (c == 0xED) {
                f.aux = 2, f.v = 0x80 | 0x9F << 8;
            } else if (c >= 0xE1 && c <= 0xEF) {
                f.aux = 2, f.v = 0x80 | 0xBF << 8;
            } else if (c == 0xF0) {
                f.aux = 3, f.v = 0x90 | 0xBF << 8;
            } else if (c >= 0xF1 && c <= 0xF3) {
                f.aux = 3, f.v = 0x80 | 0xBF << 8;
            } else if (c == 0xF4) {
                f.aux = 3, f.v = 0x80 | 0x8F << 8;
            } else {
                return -1;
            }
            f.sub = kStrUtf8;
            return 0;
        case kStrUtf8:
            if (c < (f.v & 0xFF) || c > (f.v >> 8)) return -1;
            f.v = 0x80 | 0xBF << 8;
            if (--f.aux == 0) f.sub = kStrPlain;
            return 0;
        case kStrEscape:
            if (c == 'u') {
                f.sub = kStrHex0;
                return 0;
            }
            if (!std::strchr("\"\\/bfnrt", c) || c == 0) return -1;
            f.sub = kStrPlain;
            return 0;
        default: {  // hex digit (f.sub - kStrHex0) of \uXXXX
            const int h = hex_value(c);
            if (h < 0) return -1;
            const int i = f.sub - kStrHex0;
            if (i == 0) f.aux = h == 0xD;
            if (i == 1 && f.aux && h >= 8) return -1;  // U+D800..U+DFFF: a surrogate
            f.sub = i == 3 ? uint8_t(kStrPlain) : uint8_t(f.sub + 1);
            return 0;
        }
    }
}

int GrammarState::step_number(Frame& f, uint8_t c) {
    const bool fraction_ok = g_->nodes[size_t(f.node)].types & kJsonNumber;
    const auto to = [&](uint8_t sub, uint8_t aux) {
        f.sub = sub, f.aux = aux;
        return 0;
    };
    const bool d = is_digit(c);
    switch (f.sub) {
        case kNumStart:
            if (c == '-') return to(kNumMinus, 0);
            [[fallthrough]];
        case kNumMinus:
            if (c == '0') return to(kNumZero, 1);
            if (d) return to(kNumInt, 1);
            return -1;
        case kNumInt:
            if (d) return f.aux < kMaxIntDigits ? to(kNumInt, f.aux + 1) : 1;
            [[fallthrough]];
        case kNumZero:
            if (fraction_ok && c == '.') return to(kNumDot, 0);
            if (fraction_ok && (c == 'e' || c == 'E')) return to(kNumE, 0);
            return 1;
        case kNumDot:
            return d ? to(kNumFrac, 1) : -1;
        case kNumFrac:
            if (d) return f.aux < kMaxFracDigits ? to(kNumFrac, f.aux + 1) : 1;
            if (c == 'e' || c == 'E') return to(kNumE, 0);
            return 1;
        case kNumE:
            if (c == '+' || c == '-') return to(kNumESign, 0);
            [[fallthrough]];
        case kNumESign:
            return d ? to(kNumExp, 1) : -1;
        default:  // kNumExp
            if (d) return f.aux < kMaxExpDigits ? to(kNumExp, f.aux + 1) : 1;
            return 1;
    }
}

int GrammarState::step_literal(Frame& f, uint8_t c) {
    const std::vector<std::string>& lits =
        f.node >= 0 ? g_->nodes[size_t(f.node)].literals : builtin_literals();
    if (narrow(lits, f.u, f.w, f.v, c)) {
        ++f.v;
        return 0;
    }
    return lits[f.u].size() == f.v ? 1 : -1;
}

bool GrammarState::can_end() const {
    int d = depth_;
    while (d > 1) {
        const Frame& f = frames_[size_t(d - 1)];
        if (f.kind == kNumber && number_terminal(f.sub)) {
            --d;
        } else if (f.kind == kLiteral) {
            const auto& lits =
                f.node >= 0 ? g_->nodes[size_t(f.node)].literals : builtin_literals();
            if (lits[f.u].size() != f.v) return false;
            --d;
        } else {
            return false;
        }
    }
    return d == 1 && frames_[0].sub == 1 && frames_[0].w == suffix_of(frames_[0]).size();
}

bool GrammarState::finished() const {
    return depth_ == 1 && frames_[0].sub == 1 && frames_[0].w == suffix_of(frames_[0]).size();
}

bool GrammarState::between_tokens() const {
    const uint8_t k = top().kind;
    return k == kRoot || k == kObject || k == kArray;
}

}  // namespace specula
