// SuffixTree: counts of every token run up to max_depth long in the sequences given to it, as a
// trie (suffix decoding, arXiv:2411.04975). A node is one run; its count is how many times the
// run occurred (as a start position within max_depth of some sequence). Matching the last tokens
// of a history to a node and following its most frequent children drafts what followed that run
// before; the probability of a child is its count over its parent's.
//
// Sequences are added whole (add) or token by token (Appender: the tree of one growing history),
// and removed whole (remove: an evicted request's output; nodes that reach count 0 are freed and
// reused). bytes() is what the live runs take, the figure a memory bound is checked against:
// freed nodes are reused before new ones are allocated, so the allocation stays at the largest
// live size (plus the lists' spare capacity).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace specula {

struct SuffixMatch {
    std::vector<token_id> tokens;  // the draft
    int match_len = 0;             // history tokens the draft's run matched (0: no match)
    double score = 0;              // sum of the draft tokens' estimated probabilities
};

// What a draft may be: at least min_match history tokens matched, at most
// max_spec_factor * match_len (and n_max) tokens, each with an estimated probability (the product
// of the child / parent count ratios along the way) of at least min_token_prob.
struct SuffixLimits {
    int min_match = 1;
    float max_spec_factor = 1.0f;
    float min_token_prob = 0.1f;
};

class SuffixTree {
  public:
    explicit SuffixTree(int max_depth);

    int max_depth() const { return max_depth_; }
    // Every run of up to max_depth tokens of `seq`, counted once more / once less.
    void add(std::span<const token_id> seq);
    void remove(std::span<const token_id> seq);
    void clear();

    // The best draft after `history`: every run of its last min_match .. max_depth - 1 tokens
    // found in the tree drafts by following the most frequent children; the highest score wins,
    // the longer match on a tie (its continuation is the more specific).
    SuffixMatch match(std::span<const token_id> history, int n_max,
                      const SuffixLimits& limits) const;

    size_t bytes() const;
    size_t n_nodes() const { return nodes_.size() - 1 - free_.size(); }  // runs held
    // What one node costs, and one token of a sequence at most (max_depth nodes, one of them a
    // child of the root).
    static size_t bytes_per_node();
    static size_t bytes_per_token(int max_depth);

    // Adds one growing sequence token by token: each push() counts the runs ending at it.
    class Appender {
      public:
        explicit Appender(SuffixTree& tree) : tree_(tree) {}
        void push(token_id t);
        void reset() { active_.clear(); }

      private:
        SuffixTree& tree_;
        std::vector<int32_t> active_;  // the nodes of the runs ending at the last token, by length
        std::vector<int32_t> next_;
    };

  private:
    struct Node {
        token_id tok = -1;
        int32_t parent = -1;
        int64_t count = 0;
        std::vector<int32_t> kids;
    };

    int32_t child(int32_t node, token_id t) const;
    int32_t child_or_new(int32_t node, token_id t);
    void release(int32_t node);
    void follow(int32_t node, int n_max, float min_prob, SuffixMatch& out) const;

    int max_depth_;
    std::vector<Node> nodes_;  // [0]: the root (the empty run)
    std::vector<int32_t> free_;
    std::unordered_map<token_id, int32_t> root_kids_;  // the root's children (up to the vocabulary)
    size_t kid_slots_ = 0;                             // children stored below the root
};

}  // namespace specula
