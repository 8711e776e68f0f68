// DraftBatch (speculative/drafters/draft_batch.h): drafting for several sequences in one
// draft-model pass per draft step proposes, for each, exactly the tokens (and, when sampling, the
// distributions) its drafter proposes alone, step after step with different histories, draft
// lengths, acceptances and rollbacks; and it runs one pass per draft step, not one per drafter.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/threadpool.h"
#include "speculative/drafters/draft_batch.h"
#include "speculative/drafters/draft_model_drafter.h"
#include "test_util.h"

namespace {

using namespace specula;

constexpr int kCtx = 256;

const Model& draft_model() {
    static const auto m = Model::load(test::shared_path("models/tinystories/llama2xs.gguf"));
    return *m;
}

const std::vector<std::string> kPrompts = {
    "Lily saw a big red",
    "Once upon a time, a cat",
    "The little dog",
    "Tom had a ball. He liked",
    "The sun was",
    "A bird sang",
    "Sue and Ben went to the park",
};

SamplingParams sampling(bool greedy, uint32_t seed) {
    return greedy ? SamplingParams{0.f, 0, 1.f, 0.f, 0}
                  : SamplingParams{0.9f, 40, 0.95f, 0.05f, seed};
}

// Runs `rounds` draft steps for every prompt, batched and alone, and compares every proposal.
void expect_batched_equals_alone(bool greedy, int rounds) {
    const Model& m = draft_model();
    ThreadPool pool(2);
    const int n = int(kPrompts.size());
    std::vector<std::unique_ptr<DraftModelDrafter>> batched, alone;
    std::vector<std::vector<token_id>> hist;
    for (int i = 0; i < n; ++i) {
        DraftModelParams p;
        p.n_ctx = kCtx;
        p.pool = &pool;
        p.sampling = sampling(greedy, 100u + uint32_t(i));
        batched.push_back(std::make_unique<DraftModelDrafter>(m, p));
        alone.push_back(std::make_unique<DraftModelDrafter>(m, p));
        hist.push_back(m.tokenizer().encode(kPrompts[size_t(i)], true, true));
        batched.back()->begin(hist.back());
        alone.back()->begin(hist.back());
    }
    DraftBatch db(&pool);
    std::vector<Draft> got(static_cast<size_t>(n)), want(static_cast<size_t>(n));
    long total_steps = 0, total_passes = 0;
    for (int r = 0; r < rounds; ++r) {
        std::vector<DraftJob> jobs;
        for (int i = 0; i < n; ++i) {
            const int n_max = (i + r) % 6;  // 0 (no draft this step) .. 5
            jobs.push_back({batched[size_t(i)].get(), hist[size_t(i)], n_max, &got[size_t(i)]});
        }
        const int passes = db.propose(jobs);
        int longest = 0;
        for (int i = 0; i < n; ++i) {
            const int steps =
                alone[size_t(i)]->propose(hist[size_t(i)], jobs[size_t(i)].n_max, want[size_t(i)]);
            ASSERT_EQ(jobs[size_t(i)].steps, steps) << "round " << r << " seq " << i;
            ASSERT_EQ(got[size_t(i)].tokens, want[size_t(i)].tokens)
                << "round " << r << " seq " << i;
            ASSERT_EQ(got[size_t(i)].has_q, !greedy);
            if (!greedy) {
                for (int k = 0; k < got[size_t(i)].size(); ++k) {
                    const auto& a = got[size_t(i)].q[size_t(k)];
                    const auto& b = want[size_t(i)].q[size_t(k)];
                    ASSERT_EQ(a.size(), b.size());
                    for (size_t t = 0; t < a.size(); ++t) {
                        ASSERT_EQ(a[t].id, b[t].id);
                        ASSERT_EQ(a[t].p, b[t].p);
                    }
                }
            }
            longest = std::max(longest, steps);
            total_steps += steps;
        }
        EXPECT_EQ(passes, longest) << "one draft pass per draft step, round " << r;
        total_passes += passes;
        // The target keeps a varying prefix of each proposal and adds a token of its own.
        for (int i = 0; i < n; ++i) {
            const Draft& d = got[size_t(i)];
            const int kept = d.size() ? (r + 2 * i) % (d.size() + 1) : 0;
            batched[size_t(i)]->accept(kept);
            alone[size_t(i)]->accept(kept);
            auto& h = hist[size_t(i)];
            h.insert(h.end(), d.tokens.begin(), d.tokens.begin() + kept);
            h.push_back(token_id((r * 31 + i * 7 + 13) % m.hparams().n_vocab));
        }
    }
    EXPECT_LT(total_passes * 2, total_steps) << "drafts should share passes";
}

TEST(DraftBatch, GreedyProposalsEqualEachDrafterAlone) {
    expect_batched_equals_alone(true, 12);
}

TEST(DraftBatch, SampledProposalsAndDistributionsEqualEachDrafterAlone) {
    expect_batched_equals_alone(false, 8);
}

}  // namespace
