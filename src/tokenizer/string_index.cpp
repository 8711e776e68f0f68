// StringIndex (see string_index.h): FNV-1a hashing, linear probing, load factor <= 1/2.
#include "tokenizer/string_index.h"

#include <cstring>

namespace specula {

namespace {

constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

uint64_t fnv(uint64_t h, std::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * kFnvPrime;
    return h;
}

// Final avalanche so that the low bits used for the slot depend on every byte.
uint64_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

uint64_t hash_of(std::string_view s) {
    return mix(fnv(kFnvOffset, s));
}

uint64_t hash_of_pair(std::string_view l, std::string_view r) {
    return mix(fnv(fnv(fnv(kFnvOffset, l), " "), r));
}

}  // namespace

template <class Eq>
int32_t StringIndex::probe(uint64_t h, Eq&& eq) const {
    if (slots_.empty()) return -1;
    for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
        const int32_t id = slots_[i];
        if (id < 0) return -1;
        if (eq((*keys_)[id])) return id;
    }
}

void StringIndex::build(const std::vector<std::string>& keys, Duplicates dup) {
    keys_ = &keys;
    size_t cap = 16;
    while (cap < 2 * keys.size()) cap *= 2;
    slots_.assign(cap, -1);
    mask_ = cap - 1;
    for (size_t k = 0; k < keys.size(); ++k) {
        for (uint64_t i = hash_of(keys[k]) & mask_;; i = (i + 1) & mask_) {
            int32_t& slot = slots_[i];
            if (slot < 0) {
                slot = static_cast<int32_t>(k);
                break;
            }
            if (keys[slot] == keys[k]) {
                if (dup == Duplicates::kKeepLast) slot = static_cast<int32_t>(k);
                break;
            }
        }
    }
}

int32_t StringIndex::find(std::string_view key) const {
    return probe(hash_of(key), [&](const std::string& s) { return s == key; });
}

int32_t StringIndex::find_pair(std::string_view l, std::string_view r) const {
    return probe(hash_of_pair(l, r), [&](const std::string& s) {
        return s.size() == l.size() + 1 + r.size() && s.compare(0, l.size(), l) == 0 &&
               s[l.size()] == ' ' && s.compare(l.size() + 1, r.size(), r) == 0;
    });
}

}  // namespace specula
