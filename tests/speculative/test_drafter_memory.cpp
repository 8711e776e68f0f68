// A drafter's memory in the memory plan (speculative/drafter_memory.h, model/memory_plan.h): an
// EAGLE-3 head's weights and its per-sequence KV cache, and suffix decoding's shared-tree bound
// and per-sequence trees, are plan parts with a line each; the plan's total grows by exactly
// them, the KV part with the context and the slots, the suffix part with --spec-suffix-cache-mb.
#include <gtest/gtest.h>

#include "common/format.h"
#include "model/memory_plan.h"
#include "speculative/config.h"
#include "speculative/drafter_memory.h"
#include "speculative/drafters/suffix_tree.h"
#include "test_util.h"

using namespace specula;

namespace {

const DrafterPart* find(const std::vector<DrafterPart>& parts, const std::string& label) {
    for (const DrafterPart& p : parts)
        if (p.label == label) return &p;
    return nullptr;
}

MemoryPlan plan_with(const Model& target, std::vector<DrafterPart> parts, int n_ctx, int n_seqs) {
    CachePlan cp;
    cp.n_ctx = n_ctx;
    cp.n_threads = 1;
    cp.n_seqs = n_seqs;
    cp.drafter = std::move(parts);
    return plan_memory(target, nullptr, cp, 0);
}

bool has(const std::string& line, const std::string& part) {
    return line.find(part) != std::string::npos;
}

}  // namespace

TEST(DrafterMemory, Eagle3HeadWeightsAndKvArePlanParts) {
    auto target = Model::load(test::shared_path("models/tinystories/stories260K.gguf"));
    SpeculativeFlags fl;
    fl.spec_type = "eagle3";
    fl.model_draft = std::string(SPECULA_SOURCE_DIR) + "/tests/data/eagle3/stories260K-eagle3.gguf";
    const SpeculativeSetup setup = load_speculative(parse_speculative_flags(fl), *target);
    ASSERT_TRUE(setup.eagle3);
    const Eagle3Head& h = *setup.eagle3;
    const auto parts = drafter_memory(setup, 256, KVType::F16, KVType::F16);
    const DrafterPart* w = find(parts, "EAGLE-3 head");
    const DrafterPart* kv = find(parts, "EAGLE-3 head KV");
    ASSERT_TRUE(w && kv);
    EXPECT_FALSE(w->per_seq);
    EXPECT_TRUE(kv->per_seq);
    // At least the file's tensors; one layer of K and V rows of n_embd_kv F16 values per position.
    double tensors = 0;
    for (const GGUFTensor& t : h.file->tensors()) tensors += double(t.nbytes);
    EXPECT_GE(w->bytes, tensors);
    EXPECT_GT(tensors, 0);
    EXPECT_DOUBLE_EQ(kv->bytes, 2.0 * 256 * h.hp.n_embd_kv() * 2);
    // Twice the context, twice the head's cache.
    EXPECT_DOUBLE_EQ(
        find(drafter_memory(setup, 512, KVType::F16, KVType::F16), "EAGLE-3 head KV")->bytes,
        2 * kv->bytes);
    // In the plan: its lines, the cache once per slot, the total grown by exactly them.
    const MemoryPlan plain = plan_with(*target, {}, 256, 4);
    const MemoryPlan with = plan_with(*target, parts, 256, 4);
    const std::string line = describe(with);
    EXPECT_TRUE(has(line, " + EAGLE-3 head " + format_bytes(uint64_t(w->bytes)))) << line;
    EXPECT_TRUE(has(line, " + EAGLE-3 head KV 4 x " + format_bytes(uint64_t(kv->bytes)))) << line;
    EXPECT_FALSE(has(describe(plain), "EAGLE-3"));
    // (The runtime part is the process's resident set when the plan is made: left out.)
    EXPECT_NEAR((with.total() - with.runtime) - (plain.total() - plain.runtime),
                w->bytes + 4 * kv->bytes, 1.0);
}

TEST(DrafterMemory, SuffixCacheBoundAndTreesArePlanParts) {
    auto target = Model::load(test::shared_path("models/tinystories/stories260K.gguf"));
    SpeculativeFlags fl;
    fl.spec_type = "suffix";
    const SpeculativeSetup small = load_speculative(parse_speculative_flags(fl), *target);
    fl.suffix_cache_mb = 128;
    const SpeculativeSetup big = load_speculative(parse_speculative_flags(fl), *target);
    const auto p64 = drafter_memory(small, 256, KVType::F16, KVType::F16);
    const auto p128 = drafter_memory(big, 256, KVType::F16, KVType::F16);
    ASSERT_TRUE(find(p64, "suffix cache") && find(p128, "suffix cache"));
    EXPECT_DOUBLE_EQ(find(p64, "suffix cache")->bytes, 64.0 * (1 << 20));
    EXPECT_DOUBLE_EQ(find(p128, "suffix cache")->bytes, 128.0 * (1 << 20));
    // A sequence's own tree: at most max_depth nodes per position of the context.
    const DrafterPart* tree = find(p64, "suffix tree");
    ASSERT_TRUE(tree);
    EXPECT_TRUE(tree->per_seq);
    EXPECT_DOUBLE_EQ(tree->bytes, 256.0 * double(SuffixTree::bytes_per_token(24)));
    const MemoryPlan a = plan_with(*target, p64, 256, 2), b = plan_with(*target, p128, 256, 2);
    const std::string line = describe(a);
    EXPECT_TRUE(has(line, " + suffix cache 64.00 MiB")) << line;
    EXPECT_TRUE(has(line, " + suffix tree 2 x ")) << line;
    EXPECT_NEAR((b.total() - b.runtime) - (a.total() - a.runtime), 64.0 * (1 << 20), 1.0);
    // Drafters with nothing besides a model: no parts.
    fl = SpeculativeFlags{};
    fl.spec_type = "ngram";
    EXPECT_TRUE(drafter_memory(load_speculative(parse_speculative_flags(fl), *target), 256,
                               KVType::F16, KVType::F16)
                    .empty());
}
