// GrammarVocab: see grammar_vocab.h.
#include "sampling/grammar_vocab.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace specula {

namespace {

// Inside a string in its plain state, a token without a quote is decided by the string body
// alone (whatever encloses the string): accepted iff its bytes are valid string content, which may
// end inside a UTF-8 sequence. Checked by the matcher itself.
bool string_content(std::string_view p) {
    static const std::shared_ptr<const JsonGrammar> strings = [] {
        auto g = std::make_shared<JsonGrammar>();
        g->nodes.emplace_back();
        g->nodes[0].types = kJsonString;
        g->nodes[0].min_len = 2;
        return g;
    }();
    GrammarState st(strings);
    if (!st.step('"')) return false;
    for (char c : p)
        if (!st.step(uint8_t(c))) return false;
    return true;
}

// The code points string content `p` starts (an escape is one, so is a UTF-8 sequence, even
// when the piece ends inside it).
uint32_t content_code_points(std::string_view p) {
    uint32_t n = 0;
    for (size_t i = 0; i < p.size();) {
        ++n;
        if (p[i] == '\\') {
            i += i + 1 < p.size() && p[i + 1] == 'u' ? 6 : 2;
        } else {
            ++i;
            while (i < p.size() && (uint8_t(p[i]) & 0xC0) == 0x80) ++i;
        }
    }
    return n;
}

}  // namespace

void GrammarVocab::Trie::build(const std::vector<std::string>& pieces, std::vector<int32_t> v) {
    ids = std::move(v);
    std::sort(ids.begin(), ids.end(),
              [&](int32_t a, int32_t b) { return pieces[size_t(a)] < pieces[size_t(b)]; });
    const size_t m = ids.size();
    lcp.assign(m, 0);
    for (size_t k = 1; k < m; ++k) {
        const std::string& a = pieces[size_t(ids[k - 1])];
        const std::string& b = pieces[size_t(ids[k])];
        size_t l = 0;
        while (l < a.size() && l < b.size() && a[l] == b[l]) ++l;
        lcp[k] = uint16_t(std::min<size_t>(l, UINT16_MAX));
    }
    next0.assign(m, uint32_t(m));
    next1.assign(m, uint32_t(m));
    for (size_t k = m; k-- > 1;) {
        next0[k - 1] = lcp[k] > 0 ? next0[k] : uint32_t(k);
        next1[k - 1] = lcp[k] > 1 ? next1[k] : uint32_t(k);
    }
}

GrammarVocab::GrammarVocab(std::vector<std::string> pieces, std::vector<Kind> kinds)
    : kinds_(std::move(kinds)) {
    if (pieces.size() != kinds_.size())
        fail("grammar vocab: ", pieces.size(), " pieces but ", kinds_.size(), " kinds");
    const size_t n = pieces.size();
    off_.reserve(n + 1);
    off_.push_back(0);
    std::vector<int32_t> text, quoted;
    for (size_t i = 0; i < n; ++i) {
        if (kinds_[i] == kText && pieces[i].empty()) kinds_[i] = kNever;
        blob_ += pieces[i];
        off_.push_back(uint32_t(blob_.size()));
        if (kinds_[i] == kText) {
            if (pieces[i].find('"') != std::string::npos)
                quoted.push_back(int32_t(i));
            else if (!string_content(pieces[i]))
                not_string_.push_back(int32_t(i));
            else
                by_cps_.emplace_back(content_code_points(pieces[i]), int32_t(i));
            text.push_back(int32_t(i));
            max_len_ = std::max(max_len_, pieces[i].size());
        } else {
            (kinds_[i] == kEog ? eog_ : never_).push_back(int32_t(i));
        }
    }
    one_byte_.assign(256, -1);
    for (int32_t id : text)
        if (pieces[size_t(id)].size() == 1) one_byte_[uint8_t(pieces[size_t(id)][0])] = id;
    std::sort(by_cps_.begin(), by_cps_.end(), std::greater<>());
    text_.build(pieces, std::move(text));
    quoted_.build(pieces, std::move(quoted));
}

std::shared_ptr<const GrammarVocab> GrammarVocab::from_tokenizer(const Tokenizer& tok) {
    const int n = tok.n_vocab();
    std::vector<std::string> pieces(static_cast<size_t>(n));
    std::vector<Kind> kinds(size_t(n), kText);
    for (int32_t i = 0; i < n; ++i) {
        const TokenAttr a = tok.token_attr(i);
        if (tok.is_eog(i)) {
            kinds[size_t(i)] = kEog;
        } else if (a == TokenAttr::CONTROL || a == TokenAttr::UNKNOWN || a == TokenAttr::UNUSED) {
            kinds[size_t(i)] = kNever;
        } else {
            pieces[size_t(i)] = tok.token_to_piece(i, false);
        }
    }
    return std::make_shared<GrammarVocab>(std::move(pieces), std::move(kinds));
}

bool GrammarVocab::allows(const GrammarState& st, int32_t id) const {
    GrammarState s(st);
    return accept(s, id);
}

bool GrammarVocab::accept(GrammarState& st, int32_t id) const {
    if (id < 0 || id >= n_vocab()) fail("grammar: token ", id, " outside [0, ", n_vocab(), ")");
    switch (kinds_[size_t(id)]) {
        case kEog:
            return st.can_end();
        case kNever:
            return false;
        default:
            return st.advance(piece(id));
    }
}

// path[k] is the state after the current token's first k bytes, valid for k <= valid; when a
// token's byte `fail` is refused, the tokens that share its first fail + 1 bytes are refused too.
template <class Allow, class Ban>
void GrammarVocab::walk(const Trie& trie, const GrammarState& st, Allow&& allow, Ban&& ban) const {
    thread_local std::vector<GrammarState> path;
    if (path.size() < max_len_ + 1) path.assign(max_len_ + 1, st);
    path[0] = st;
    size_t valid = 0;
    const size_t n = trie.ids.size();
    for (size_t k = 0; k < n;) {
        const int32_t id = trie.ids[k];
        const size_t l = k == 0 ? 0 : trie.lcp[k];
        const uint32_t begin = off_[size_t(id)], len = off_[size_t(id) + 1] - begin;
        size_t fail = SIZE_MAX;
        for (size_t d = std::min(l, valid); d < len; ++d) {
            path[d + 1] = path[d];
            if (!path[d + 1].step(uint8_t(blob_[begin + d]))) {
                fail = d;
                break;
            }
        }
        if (fail == SIZE_MAX) {
            allow(id);
            valid = len;
            ++k;
            continue;
        }
        valid = fail;
        size_t end = k + 1;
        if (fail == 0)
            end = trie.next0[k];
        else if (fail == 1)
            end = trie.next1[k];
        else
            while (end < n && trie.lcp[end] > fail) ++end;
        for (; k < end; ++k) ban(trie.ids[k]);
    }
}

template <class Ban>
void GrammarVocab::ban_longer(size_t budget, Ban&& ban) const {
    for (const auto& [cps, id] : by_cps_) {
        if (cps <= budget) break;
        ban(id);
    }
}

void GrammarVocab::mask(const GrammarState& st, float* logits) const {
    const auto ban = [&](int32_t id) { logits[id] = -INFINITY; };
    for (int32_t id : never_) ban(id);
    if (!st.can_end())
        for (int32_t id : eog_) ban(id);
    if (st.in_plain_string()) {  // string content stays allowed; walk the tokens with a quote
        for (int32_t id : not_string_) ban(id);
        ban_longer(st.plain_string_budget(), ban);
        walk(
            quoted_, st, [](int32_t) {}, ban);
        return;
    }
    // Few tokens are allowed here: collect them, fill the row with -inf, put them back.
    thread_local std::vector<std::pair<int32_t, float>> keep;
    keep.clear();
    if (st.can_end())
        for (int32_t id : eog_) keep.emplace_back(id, logits[id]);
    walk(
        text_, st, [&](int32_t id) { keep.emplace_back(id, logits[id]); }, [](int32_t) {});
    std::fill(logits, logits + n_vocab(), -INFINITY);
    for (const auto& [id, l] : keep) logits[id] = l;
}

void GrammarVocab::allowed(const GrammarState& st, std::vector<uint8_t>& out) const {
    out.assign(size_t(n_vocab()), 1);
    const auto ban = [&](int32_t id) { out[size_t(id)] = 0; };
    for (int32_t id : never_) ban(id);
    if (!st.can_end())
        for (int32_t id : eog_) ban(id);
    if (st.in_plain_string()) {
        for (int32_t id : not_string_) ban(id);
        ban_longer(st.plain_string_budget(), ban);
        walk(
            quoted_, st, [](int32_t) {}, ban);
        return;
    }
    walk(
        text_, st, [](int32_t) {}, ban);
}

int32_t GrammarVocab::longest_piece_prefix(std::string_view bytes) const {
    const std::vector<int32_t>& ids = text_.ids;
    for (size_t len = std::min(bytes.size(), max_len_); len > 0; --len) {
        const std::string_view want = bytes.substr(0, len);
        auto it = std::upper_bound(ids.begin(), ids.end(), want,
                                   [&](std::string_view w, int32_t id) { return w < piece(id); });
        int32_t best = -1;
        for (; it != ids.begin() && piece(*(it - 1)) == want; --it)
            best = std::max(best, *(it - 1));
        if (best >= 0) return best;
    }
    return -1;
}

int32_t GrammarVocab::only_token(const GrammarState& st) const {
    if (st.in_plain_string()) return -1;  // every plain content byte is allowed
    const int n_eog = st.can_end() ? int(eog_.size()) : 0;
    if (st.finished()) return n_eog == 1 ? eog_[0] : -1;  // no text can follow
    // Cheap first: each legal byte that is a token on its own is an allowed token.
    int n = n_eog;
    for (unsigned b = 0; b < 256; ++b) {
        if (one_byte_[b] < 0) continue;
        GrammarState p(st);
        if (p.step(uint8_t(b)) && ++n > 1) return -1;
    }
    n = n_eog;
    int32_t one = n_eog == 1 ? eog_[0] : -1;
    walk(
        text_, st,
        [&](int32_t id) {
            if (++n == 1) one = id;
        },
        [](int32_t) {});
    return n == 1 ? one : -1;
}

int GrammarVocab::forced_tokens(GrammarState& st, int max_tokens, std::string& bytes,
                                std::vector<int32_t>& out) const {
    int n = 0;
    while (n < max_tokens) {
        st.forced_bytes(bytes, size_t(max_tokens - n) * std::max<size_t>(max_len_, 1));
        if (bytes.empty()) {
            const int32_t id = only_token(st);
            if (id < 0) break;
            out.push_back(id);
            ++n;
            if (kinds_[size_t(id)] == kEog || !accept(st, id)) break;
            continue;
        }
        size_t pos = 0;
        while (pos < bytes.size() && n < max_tokens) {
            const int32_t id = longest_piece_prefix(std::string_view(bytes).substr(pos));
            if (id < 0 || !accept(st, id)) return n;
            out.push_back(id);
            ++n;
            pos += piece(id).size();
        }
    }
    return n;
}

}  // namespace specula
