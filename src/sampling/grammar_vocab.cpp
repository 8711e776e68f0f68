// GrammarVocab: see grammar_vocab.h.
#include "sampling/grammar_vocab.h"

#include <cmath>

#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace specula {

namespace {

// Plain string content: no quote, backslash or control byte, and complete, valid UTF-8 (so the
// string body is back in its plain state after it). Checked by the matcher itself.
bool plain_piece(std::string_view p) {
    static const std::shared_ptr<const JsonGrammar> strings = [] {
        auto g = std::make_shared<JsonGrammar>();
        g->nodes.emplace_back();
        g->nodes[0].types = kJsonString;
        return g;
    }();
    GrammarState st(strings);
    if (!st.step('"')) return false;
    for (char c : p) {
        const uint8_t b = uint8_t(c);
        if (b == '"' || b == '\\' || !st.step(b)) return false;
    }
    return st.in_plain_string();
}

}  // namespace

GrammarVocab::GrammarVocab(std::vector<std::string> pieces, std::vector<Kind> kinds)
    : kinds_(std::move(kinds)) {
    if (pieces.size() != kinds_.size())
        fail("grammar vocab: ", pieces.size(), " pieces but ", kinds_.size(), " kinds");
    const size_t n = pieces.size();
    off_.reserve(n + 1);
    off_.push_back(0);
    plain_.assign(n, 0);
    std::vector<uint32_t> count(257, 0);
    for (size_t i = 0; i < n; ++i) {
        if (kinds_[i] == kText && pieces[i].empty()) kinds_[i] = kNever;
        blob_ += pieces[i];
        off_.push_back(uint32_t(blob_.size()));
        if (kinds_[i] == kText) {
            plain_[i] = plain_piece(pieces[i]);
            ++count[uint8_t(pieces[i][0]) + 1];
        } else {
            (kinds_[i] == kEog ? eog_ : never_).push_back(int32_t(i));
        }
    }
    bucket_.assign(257, 0);
    for (int b = 0; b < 256; ++b)
        bucket_[size_t(b) + 1] = bucket_[size_t(b)] + count[size_t(b) + 1];
    by_first_.resize(bucket_[256]);
    std::vector<uint32_t> next(bucket_.begin(), bucket_.end() - 1);
    for (size_t i = 0; i < n; ++i)
        if (kinds_[i] == kText) by_first_[next[uint8_t(pieces[i][0])]++] = int32_t(i);
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

template <class Ban>
void GrammarVocab::for_each_banned(const GrammarState& st, Ban&& ban) const {
    if (!st.can_end())
        for (int32_t id : eog_) ban(id);
    for (int32_t id : never_) ban(id);
    GrammarState first(st), walk(st);
    const auto walk_ok = [&](const GrammarState& from, int32_t id, size_t skip) {
        walk = from;
        for (size_t i = off_[size_t(id)] + skip; i < off_[size_t(id) + 1]; ++i)
            if (!walk.step(uint8_t(blob_[i]))) return false;
        return true;
    };
    const bool plain = st.in_plain_string();
    for (int b = 0; b < 256; ++b) {
        const uint32_t lo = bucket_[size_t(b)], hi = bucket_[size_t(b) + 1];
        if (lo == hi) continue;
        first = st;
        if (!first.step(uint8_t(b))) {
            for (uint32_t k = lo; k < hi; ++k) ban(by_first_[k]);
            continue;
        }
        for (uint32_t k = lo; k < hi; ++k) {
            const int32_t id = by_first_[k];
            if (plain && plain_[size_t(id)]) continue;
            if (!walk_ok(first, id, 1)) ban(id);
        }
    }
}

void GrammarVocab::mask(const GrammarState& st, float* logits) const {
    for_each_banned(st, [&](int32_t id) { logits[id] = -INFINITY; });
}

void GrammarVocab::allowed(const GrammarState& st, std::vector<uint8_t>& out) const {
    out.assign(size_t(n_vocab()), 1);
    for_each_banned(st, [&](int32_t id) { out[size_t(id)] = 0; });
}

}  // namespace specula
