// SuffixTree: see suffix_tree.h.
#include "speculative/drafters/suffix_tree.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace specula {

SuffixTree::SuffixTree(int max_depth) : max_depth_(max_depth) {
    if (max_depth < 2) fail("suffix tree: the depth must be at least 2, got ", max_depth);
    nodes_.emplace_back();  // the root
}

void SuffixTree::clear() {
    nodes_.resize(1);
    nodes_[0] = Node{};
    free_.clear();
    root_kids_.clear();
    kid_slots_ = 0;
}

size_t SuffixTree::bytes_per_node() {
    return sizeof(Node) + sizeof(int32_t);  // the node and its slot in its parent's list
}

// A root child is a hash-map entry (key, value, next pointer, hash) instead of a list slot.
constexpr size_t kMapEntry = 32;

size_t SuffixTree::bytes_per_token(int max_depth) {
    return size_t(max_depth) * bytes_per_node() + kMapEntry;
}

size_t SuffixTree::bytes() const {
    return (1 + n_nodes()) * sizeof(Node) + kid_slots_ * sizeof(int32_t) +
           root_kids_.size() * kMapEntry;
}

int32_t SuffixTree::child(int32_t node, token_id t) const {
    if (node == 0) {
        const auto it = root_kids_.find(t);
        return it == root_kids_.end() ? -1 : it->second;
    }
    for (int32_t k : nodes_[size_t(node)].kids)
        if (nodes_[size_t(k)].tok == t) return k;
    return -1;
}

int32_t SuffixTree::child_or_new(int32_t node, token_id t) {
    if (const int32_t k = child(node, t); k >= 0) return k;
    int32_t k;
    if (!free_.empty()) {
        k = free_.back();
        free_.pop_back();
    } else {
        k = int32_t(nodes_.size());
        nodes_.emplace_back();
    }
    Node& n = nodes_[size_t(k)];
    n.tok = t;
    n.parent = node;
    n.count = 0;
    n.kids.clear();
    if (node == 0) {
        root_kids_.emplace(t, k);
    } else {
        nodes_[size_t(node)].kids.push_back(k);
        ++kid_slots_;
    }
    return k;
}

// Unlinks a node whose count reached 0 (its children already went) and frees it.
void SuffixTree::release(int32_t node) {
    Node& n = nodes_[size_t(node)];
    if (n.parent == 0) {
        root_kids_.erase(n.tok);
    } else {
        std::vector<int32_t>& kids = nodes_[size_t(n.parent)].kids;
        const auto it = std::find(kids.begin(), kids.end(), node);
        *it = kids.back();
        kids.pop_back();
        --kid_slots_;
    }
    n.kids = {};
    n.parent = -1;
    free_.push_back(node);
}

void SuffixTree::Appender::push(token_id t) {
    next_.clear();
    const int32_t first = tree_.child_or_new(0, t);
    ++tree_.nodes_[size_t(first)].count;
    next_.push_back(first);
    // active_[i] is the run of length i + 1 ending at the previous token.
    for (size_t i = 0; i < active_.size() && int(i) + 2 <= tree_.max_depth_; ++i) {
        const int32_t k = tree_.child_or_new(active_[i], t);
        ++tree_.nodes_[size_t(k)].count;
        next_.push_back(k);
    }
    std::swap(active_, next_);
}

void SuffixTree::add(std::span<const token_id> seq) {
    Appender a(*this);
    for (token_id t : seq) a.push(t);
}

void SuffixTree::remove(std::span<const token_id> seq) {
    std::vector<int32_t> path;
    for (size_t j = 0; j < seq.size(); ++j) {
        path.clear();
        const size_t len = std::min(seq.size() - j, size_t(max_depth_));
        int32_t node = 0;
        for (size_t i = 0; i < len; ++i) {
            node = child(node, seq[j + i]);
            if (node < 0) fail("suffix tree: removing a sequence that was never added");
            path.push_back(node);
        }
        // Deepest first: a node reaching 0 has no children left by then.
        for (auto it = path.rbegin(); it != path.rend(); ++it)
            if (--nodes_[size_t(*it)].count == 0) release(*it);
    }
}

// Follows the most frequent child (the smaller id on a tie) while the running probability stays
// at or above min_prob.
void SuffixTree::follow(int32_t node, int n_max, float min_prob, SuffixMatch& out) const {
    double prob = 1.0;
    for (int i = 0; i < n_max; ++i) {
        const Node& cur = nodes_[size_t(node)];
        int32_t best = -1;
        for (int32_t k : cur.kids) {
            const Node& c = nodes_[size_t(k)];
            if (best < 0 || c.count > nodes_[size_t(best)].count ||
                (c.count == nodes_[size_t(best)].count && c.tok < nodes_[size_t(best)].tok))
                best = k;
        }
        if (best < 0) return;
        prob *= double(nodes_[size_t(best)].count) / double(cur.count);
        if (prob < min_prob) return;
        out.tokens.push_back(nodes_[size_t(best)].tok);
        out.score += prob;
        node = best;
    }
}

SuffixMatch SuffixTree::match(std::span<const token_id> history, int n_max,
                              const SuffixLimits& limits) const {
    SuffixMatch best;
    // A run of max_depth - 1 tokens still has a level of continuations below it.
    const int longest = std::min<int>(int(history.size()), max_depth_ - 1);
    SuffixMatch cand;
    for (int len = std::max(1, limits.min_match); len <= longest; ++len) {
        int32_t node = 0;
        for (size_t i = history.size() - size_t(len); i < history.size() && node >= 0; ++i)
            node = child(node, history[i]);
        if (node < 0) break;  // no longer run can match either
        if (node == 0 || nodes_[size_t(node)].kids.empty()) continue;
        const int cap = int(std::floor(double(limits.max_spec_factor) * len));
        cand.tokens.clear();
        cand.score = 0;
        follow(node, std::min(n_max, cap), limits.min_token_prob, cand);
        if (!cand.tokens.empty() && cand.score >= best.score) {
            best.tokens = cand.tokens;
            best.score = cand.score;
            best.match_len = len;
        }
    }
    return best;
}

}  // namespace specula
