// StringIndex: an open-addressing hash index from strings to their position in a vector the
// caller owns (token texts, merge lines). It stores only int32 positions, so indexing a 150k-token
// vocabulary or 280k merges costs one small array and no per-entry allocation. The indexed vector
// must outlive the index and stay unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace specula {

class StringIndex {
  public:
    enum class Duplicates { kKeepFirst, kKeepLast };

    // Indexes keys[i] -> i.
    void build(const std::vector<std::string>& keys, Duplicates dup);

    // Position of `key`, or -1.
    int32_t find(std::string_view key) const;
    // Position of the key `left + " " + right`, or -1 (without building that string).
    int32_t find_pair(std::string_view left, std::string_view right) const;

  private:
    template <class Eq>
    int32_t probe(uint64_t h, Eq&& eq) const;

    const std::vector<std::string>* keys_ = nullptr;
    std::vector<int32_t> slots_;  // -1: empty
    uint64_t mask_ = 0;
};

}  // namespace specula
