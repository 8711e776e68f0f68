// GrammarState (grammar_state.h), continued from grammar_state.cpp: strings under a StringRule
// (minLength / maxLength / pattern / format, decoded code point by code point) and the shortest
// completion (min_remaining).
#include <algorithm>
#include <cstdint>

#include "sampling/grammar_state.h"
#include "sampling/grammar_state_detail.h"

namespace specula {

using namespace grammar_detail;

bool GrammarState::in_plain_string() const {
    const Frame& f = top();
    if (f.sub != kStrPlain) return false;
    if (f.kind == kString) {
        const StringRule* r = rule_of(f);
        return !r || r->free_run(f.seen) || r->open_run(f.seen);
    }
    return f.kind == kKey && f.aux2 == kKeyFree;
}

size_t GrammarState::plain_string_budget() const {
    const Frame& f = top();
    const StringRule* r = f.kind == kString ? rule_of(f) : nullptr;
    if (!r || r->max_length < 0) return SIZE_MAX;
    return size_t(uint32_t(r->max_length) - std::min(f.u, uint32_t(r->max_length)));
}

const StringRule* GrammarState::rule_of(const Frame& f) const {
    const int32_t r = g_->nodes[size_t(f.node)].string_rule;
    return r >= 0 ? &g_->string_rules[size_t(r)] : nullptr;
}

namespace {

// The code points a partly read UTF-8 sequence can still become: `bits` read so far, `pending`
// continuation bytes to come, `len` bytes in all (no overlong forms, nothing above U+10FFFF).
std::pair<uint32_t, uint32_t> utf8_span(uint32_t bits, int pending, int len) {
    const uint32_t lo = bits << (6 * pending), hi = lo | ((1u << (6 * pending)) - 1);
    const uint32_t least = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    return {std::max(lo, least), std::min(hi, uint32_t(0x10FFFF))};
}

// The same for \uXXXX with `digits` hex digits read.
std::pair<uint32_t, uint32_t> hex_span(uint32_t bits, int digits) {
    const int left = 4 * (4 - digits);
    return {bits << left, (bits << left) | ((1u << left) - 1)};
}

uint32_t unescape(uint8_t c) {
    switch (c) {
        case 'b':
            return '\b';
        case 'f':
            return '\f';
        case 'n':
            return '\n';
        case 'r':
            return '\r';
        case 't':
            return '\t';
        default:
            return c;  // " \\ /
    }
}

constexpr uint8_t kShortEscapes[] = {'"', '\\', '/', 'b', 'f', 'n', 'r', 't'};

// n * m at most kMaxMinLen (n < 2^31 items, m a node's saturated length): no overflow in the sums.
size_t times(size_t n, size_t m) {
    return m != 0 && n > kMaxMinLen / m ? kMaxMinLen : std::min(n * m, kMaxMinLen);
}

}  // namespace

// A string under a StringRule: the string body's checks, then the decoded code points through the
// rule. A byte that starts or continues a code point is admitted only if some code point it can
// still become leads on to an admitted string.
int GrammarState::step_rule_string(Frame& f, const StringRule& r, uint8_t c) {
    const uint8_t sub = f.sub;
    if (sub == kStrPlain && c == '"') return r.can_close(f.seen, f.u) ? 1 : -1;
    if (step_string_body(f, c) != 0) return -1;
    const auto possible = [&](std::pair<uint32_t, uint32_t> span) {
        return r.rest_after(f.seen, f.u, span.first, span.second) != StringRule::kInf ? 0 : -1;
    };
    const auto complete = [&](uint32_t cp) {
        const uint64_t next = r.next(f.seen, f.u, cp);
        if (!next) return -1;
        f.seen = next, ++f.u;
        return 0;
    };
    switch (sub) {
        case kStrPlain:
            if (c == '\\') return possible({0, 0xFFFF});  // every escape writes one of these
            if (c < 0x80) return complete(c);
            f.aux2 = uint8_t(f.aux + 1);
            f.w = c & (0x3Fu >> f.aux);
            return possible(utf8_span(f.w, f.aux, f.aux2));
        case kStrUtf8:
            f.w = f.w << 6 | (c & 0x3Fu);
            if (f.sub == kStrPlain) return complete(f.w);
            return possible(utf8_span(f.w, f.aux, f.aux2));
        case kStrEscape:
            if (c != 'u') return complete(unescape(c));
            f.w = 0;
            return possible({0, 0xFFFF});
        default: {  // a hex digit
            const int h = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
            f.w = f.w << 4 | uint32_t(h);
            if (f.sub == kStrPlain) return complete(f.w);
            return possible(hex_span(f.w, sub - kStrHex0 + 1));
        }
    }
}

// The fewest bytes that end a string under a rule, closing quote included.
size_t GrammarState::rule_rest(const Frame& f, const StringRule& r) const {
    uint32_t m = StringRule::kInf;
    switch (f.sub) {
        case kStrPlain:
            m = r.rest(f.seen, f.u);
            break;
        case kStrUtf8: {
            const auto [lo, hi] = utf8_span(f.w, f.aux, f.aux2);
            m = f.aux + r.rest_after(f.seen, f.u, lo, hi);
            break;
        }
        case kStrEscape: {
            for (uint8_t e : kShortEscapes) {
                const uint32_t cp = unescape(e), d = r.rest_after(f.seen, f.u, cp, cp);
                if (d != StringRule::kInf) m = std::min(m, 1 + d);
            }
            const uint32_t d = r.rest_after(f.seen, f.u, 0, 0xFFFF);
            if (d != StringRule::kInf) m = std::min(m, 5 + d);
            break;
        }
        default: {
            const int digits = f.sub - kStrHex0;
            const auto [lo, hi] = hex_span(f.w, digits);
            m = uint32_t(4 - digits) + r.rest_after(f.seen, f.u, lo, hi);
            break;
        }
    }
    return size_t(m) + 1;
}

size_t GrammarState::min_len(int32_t node) const {
    return g_->nodes[size_t(node)].min_len;  // computed once by the compiler (json_grammar.h)
}

// After a value in object `obj` with properties `seen` written: the required ones left, each
// after a comma, then '}'.
size_t GrammarState::object_tail(const Frame& obj, uint64_t seen) const {
    const JsonNode& n = g_->nodes[size_t(obj.node)];
    size_t len = 1;
    for (size_t i = 0; i < n.prop_names.size(); ++i)
        if ((n.required & ~seen) >> i & 1)
            len += 1 + n.prop_names[i].size() + 3 + min_len(n.prop_nodes[i]);
    return len;
}

size_t GrammarState::after_key(const Frame& obj, uint32_t prop) const {
    const JsonNode& n = g_->nodes[size_t(obj.node)];
    if (prop == kAdditional) return 1 + min_len(n.additional) + object_tail(obj, obj.seen);
    return 1 + min_len(n.prop_nodes[prop]) + object_tail(obj, obj.seen | uint64_t(1) << prop);
}

size_t GrammarState::min_remaining() const {
    size_t total = 0;
    for (int d = depth_ - 1; d >= 0; --d) {
        const Frame& f = frames_[size_t(d)];
        const JsonNode* n = f.node >= 0 ? &g_->nodes[size_t(f.node)] : nullptr;
        switch (f.kind) {
            case kRoot:
                if (f.sub == 0 && !g_->alternatives.empty()) {  // the shortest still open
                    size_t best = SIZE_MAX;
                    for (uint32_t a = uint32_t(f.seen); a < uint32_t(f.seen >> 32); ++a) {
                        const JsonAlternative& alt = g_->alternatives[a];
                        best = std::min(
                            best, alt.prefix.size() - f.v + min_len(alt.root) + alt.suffix.size());
                    }
                    total += best;
                } else {
                    total += (f.sub == 0 ? prefix_of(f).size() - f.v + min_len(root_of(f)) : 0) +
                             suffix_of(f).size() - f.w;
                }
                break;
            case kString:
                if (const StringRule* rule = rule_of(f)) {
                    total += rule_rest(f, *rule);
                    break;
                }
                total += 1 + (f.sub == kStrEscape ? 1
                              : f.sub == kStrUtf8 ? f.aux
                              : f.sub >= kStrHex0 ? size_t(kStrHex3 - f.sub + 1)
                                                  : 0);
                break;
            case kNumber:
                total += number_terminal(f.sub) ? 0 : 1;
                break;
            case kLiteral: {
                const auto& lits = n ? n->literals : builtin_literals();
                size_t m = SIZE_MAX;
                for (uint32_t i = f.u; i < f.w; ++i) m = std::min(m, lits[i].size() - f.v);
                total += m;
                break;
            }
            case kArray: {
                const size_t ml = min_len(n->items), cnt = f.u, mn = size_t(n->min_items);
                if (f.sub == kArrStart)
                    total += mn == 0 ? 1 : times(mn, ml + 1);
                else if (f.sub == kArrAfterValue)
                    total += (mn > cnt ? times(mn - cnt, ml + 1) : 0) + 1;
                else
                    total += ml + (mn > cnt + 1 ? times(mn - cnt - 1, ml + 1) : 0) + 1;
                break;
            }
            case kObject: {
                if (f.sub == kObjAfterValue) {
                    total += object_tail(f, f.seen);
                } else if (f.sub == kObjAfterKey || f.sub == kObjBeforeValue) {
                    const int32_t v = f.u == kAdditional ? n->additional : n->prop_nodes[f.u];
                    total += (f.sub == kObjAfterKey) + min_len(v) + object_tail(f, f.seen);
                } else {  // a key is next: the cheapest key and what follows it
                    size_t m = n->additional >= 0 ? 2 + after_key(f, kAdditional) : SIZE_MAX;
                    for (uint32_t i = 0; i < n->prop_names.size(); ++i)
                        if (!(f.seen >> i & 1))
                            m = std::min(m, n->prop_names[i].size() + 2 + after_key(f, i));
                    if (f.sub == kObjStart && n->required == 0) m = 1;
                    total += m;
                }
                break;
            }
            case kKey: {  // the key's rest and the object below it (skipped)
                const Frame& obj = frames_[size_t(d - 1)];
                const JsonNode& on = g_->nodes[size_t(obj.node)];
                const size_t pending = f.sub == kStrEscape ? 1
                                       : f.sub == kStrUtf8 ? f.aux
                                       : f.sub >= kStrHex0 ? size_t(kStrHex3 - f.sub + 1)
                                                           : 0;
                size_t m = SIZE_MAX;
                if (f.aux2 == kKeyFree) {
                    m = pending + 1 + after_key(obj, kAdditional);
                } else {
                    const size_t pos = size_t(f.seen);
                    for (uint32_t i = f.u; i < f.w; ++i)
                        if (!(obj.seen >> i & 1))
                            m = std::min(m, on.prop_names[i].size() - pos + 1 + after_key(obj, i));
                    if (on.additional >= 0) {
                        // Closing now is refused only when the prefix is a seen name exactly.
                        const bool exact_seen =
                            f.u < f.w && on.prop_names[f.u].size() == pos && (obj.seen >> f.u & 1);
                        m = std::min(m, size_t(exact_seen) + 1 + after_key(obj, kAdditional));
                    }
                }
                total += m;
                --d;
                break;
            }
        }
    }
    return total;
}

}  // namespace specula
