// The generation loop allocates nothing per token once warmed up (issue #5: no allocation on the
// per-token path): plain decoding, draft-model speculation (greedy and sampled), fixed and
// adaptive draft lengths, and n-gram lookup. Counting starts at the second emitted token of a
// second generate() on the same objects, so the buffers sized by the first run are reused.
#include <gtest/gtest.h>

#include <memory>

#include "alloc_counter.h"  // replaces global new/delete: include from one file per test
#include "model/session.h"
#include "speculative/drafters/draft_model_drafter.h"
#include "speculative/drafters/ngram_drafter.h"
#include "speculative/generator.h"
#include "test_util.h"

using namespace specula;

namespace {

struct Case {
    const char* name;
    int n_draft;  // 0: plain
    bool automatic;
    bool ngram;
    float temp;
};

long allocations_per_run(const Case& c) {
    const auto target = Model::load(test::shared_path("models/tinystories/stories260K.gguf"));
    const auto draft = Model::load(test::shared_path("models/tinystories/llama2xs.gguf"));
    Session session(*target, SessionParams{0, 2});
    SamplingParams sp;
    sp.temp = c.temp;
    sp.seed = 7;
    Sampler sampler(sp);
    std::unique_ptr<Drafter> drafter;
    if (c.ngram) {
        drafter = std::make_unique<NgramDrafter>(NgramParams{});
    } else if (c.n_draft > 0 || c.automatic) {
        DraftModelParams dp;
        dp.n_threads = 2;
        dp.sampling = sp;
        drafter = std::make_unique<DraftModelDrafter>(*draft, dp);
    }
    GenParams gp;
    gp.n_predict = 96;
    gp.ignore_eos = true;
    gp.n_draft = c.n_draft;
    DraftLengthController automatic;
    Generator gen(session, sampler, drafter.get(), gp, c.automatic ? &automatic : nullptr);
    const auto prompt = target->tokenizer().encode("Once upon a time, there was a", true, false);
    gen.generate(prompt);  // warm-up: sizes every buffer

    int emitted = 0;
    test::g_allocs = 0;
    const SpecStats st = gen.generate(prompt, [&](token_id, bool) {
        if (++emitted == 2) test::g_counting = true;
        return true;
    });
    test::g_counting = false;
    EXPECT_EQ(st.n_generated, 96) << c.name;
    return test::g_allocs.load();
}

}  // namespace

TEST(SpecNoAlloc, CounterWorks) {
    test::g_allocs = 0;
    test::g_counting = true;
    auto p = std::make_unique<int>(3);
    test::g_counting = false;
    EXPECT_EQ(*p, 3);
    EXPECT_GT(test::g_allocs.load(), 0);
}

TEST(SpecNoAlloc, GenerationLoopDoesNotAllocatePerToken) {
    for (const Case& c :
         {Case{"plain", 0, false, false, 0.f}, Case{"draft 4", 4, false, false, 0.f},
          Case{"draft 8 temp 0.8", 8, false, false, 0.8f}, Case{"draft auto", 0, true, false, 0.f},
          Case{"ngram 4", 4, false, true, 0.f}}) {
        EXPECT_EQ(allocations_per_run(c), 0) << c.name;
    }
}
