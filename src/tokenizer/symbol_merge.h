// The pairwise merge loop shared by the SentencePiece (spm.cpp) and byte-level BPE (bpe.cpp)
// tokenizers: a word is split into symbols, and the best adjacent pair (highest key; ties go to
// the leftmost pair) is merged again and again until no pair can merge. SPM keys a pair by the
// merged token's score, BPE by its negated merge rank.
#pragma once

#include <cstddef>
#include <optional>
#include <queue>
#include <vector>

namespace specula {

// Bytes [off, off + n) of the word; n == 0 once merged into its left neighbour. prev/next link
// the live symbols (-1 at the ends).
struct Symbol {
    int prev, next;
    size_t off, n;
};

// pair_key(left, right) gives the key of merging two live neighbours, or nullopt if they cannot.
template <class Key, class PairKey>
void merge_symbols(std::vector<Symbol>& syms, PairKey&& pair_key) {
    struct Bigram {
        int left, right;
        Key key;
        size_t size;  // merged length when queued; a pair whose symbols changed since is stale
    };
    struct Less {
        bool operator()(const Bigram& a, const Bigram& b) const {
            return a.key < b.key || (a.key == b.key && a.left > b.left);
        }
    };
    std::priority_queue<Bigram, std::vector<Bigram>, Less> q;
    auto add = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        if (std::optional<Key> k = pair_key(syms[left], syms[right]))
            q.push({left, right, *k, syms[left].n + syms[right].n});
    };
    for (int i = 1; i < static_cast<int>(syms.size()); ++i) add(i - 1, i);
    while (!q.empty()) {
        const Bigram b = q.top();
        q.pop();
        Symbol& l = syms[b.left];
        Symbol& r = syms[b.right];
        if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // stale
        l.n += r.n;
        r.n = 0;
        l.next = r.next;
        if (r.next >= 0) syms[r.next].prev = b.left;
        add(l.prev, b.left);
        add(b.left, l.next);
    }
}

}  // namespace specula
