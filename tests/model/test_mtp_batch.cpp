// One MTP head pass for every sequence of a step:
//  - BatchEvaluator::eval_mtp over several sessions (different head cache lengths, a chained
//    row) gives each session the mtp_logits / mtp_hidden of its own Session::eval_mtp, bit for
//    bit, for the dense head and for qwen35moe's head with its own experts; bad items are Errors
//    before anything changes;
//  - DraftBatch with several MtpDrafters proposes, step after step (varying draft lengths,
//    acceptances and corrections), exactly what each drafter proposes alone, in as many rounds
//    as the longest proposal (one head pass per round, not one per sequence);
//  - the engine stepping 4 sequences with MTP drafting at once gives each the plain greedy
//    output, and the same drafts kept as the sequence stepped alone.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "arch_test_util.h"
#include "common/error.h"
#include "common/threadpool.h"
#include "model/batch_eval.h"
#include "model/load/model.h"
#include "model/session.h"
#include "speculative/drafters/draft_batch.h"
#include "speculative/drafters/mtp_drafter.h"
#include "speculative/engine.h"
#include "speculative/generator.h"
#include "test_util.h"

namespace {

using namespace specula;

const std::string kDir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";
const std::string kMtp = kDir + "rand-qwen35-mtp1-tok512-d128-l4-F16.gguf";
const std::string kMoeMtp = kDir + "rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16.gguf";
constexpr int kSeqs = 4;

SessionParams params(ThreadPool* pool) {
    SessionParams p;
    p.n_ctx = 256;
    p.n_threads = 2;
    p.pool = pool;
    return p;
}

SamplingParams greedy() {
    SamplingParams p;
    p.temp = 0.f;
    return p;
}

bool same_rows(const float* a, const float* b, int n) {
    return std::memcmp(a, b, sizeof(float) * size_t(n)) == 0;
}

// Sequence i: a prompt of 6 + 3 i tokens through the main pass (every hidden row), then its
// head over the first i + 1 positions, so that the batched pass finds head caches of different
// lengths.
void prepare(const Model& m, Session& s, int i, std::vector<token_id>& next,
             std::vector<float>& hidden) {
    const std::vector<token_id> toks = test::random_tokens(6 + 3 * i, 40 + i);
    const int L = int(toks.size()) - 1;
    s.eval(std::span(toks).first(size_t(L)));
    const size_t d = size_t(m.hparams().n_embd);
    hidden.clear();
    for (int p = 0; p < L; ++p) hidden.insert(hidden.end(), s.hidden(p), s.hidden(p) + d);
    s.eval_mtp(std::span(toks).subspan(1, size_t(i + 1)), hidden.data());
    next.assign(toks.begin() + i + 2, toks.end());
    hidden.erase(hidden.begin(), hidden.begin() + d * size_t(i + 1));
}

void expect_batched_head_equals_alone(const std::string& file) {
    SCOPED_TRACE(file);
    const auto m = Model::load(file);
    const int nv = m->hparams().n_vocab, d = m->hparams().n_embd;
    ThreadPool pool(2);
    std::vector<std::unique_ptr<Session>> a, b;
    std::vector<std::vector<token_id>> next(kSeqs);
    std::vector<std::vector<float>> hidden(kSeqs);
    std::vector<MtpItem> items;
    for (int i = 0; i < kSeqs; ++i) {
        a.push_back(std::make_unique<Session>(*m, params(&pool)));
        b.push_back(std::make_unique<Session>(*m, params(&pool)));
        prepare(*m, *a.back(), i, next[size_t(i)], hidden[size_t(i)]);
        std::vector<token_id> n2;
        std::vector<float> h2;
        prepare(*m, *b.back(), i, n2, h2);
        items.push_back({b.back().get(), next[size_t(i)], hidden[size_t(i)].data()});
    }
    BatchEvaluator eval(*m, pool);
    for (int round = 0; round < 2; ++round) {
        for (int i = 0; i < kSeqs; ++i)
            a[size_t(i)]->eval_mtp(items[size_t(i)].next, items[size_t(i)].hidden);
        eval.eval_mtp(items);
        for (int i = 0; i < kSeqs; ++i) {
            const Session &x = *a[size_t(i)], &y = *b[size_t(i)];
            ASSERT_EQ(x.mtp_n_past(), y.mtp_n_past());
            for (int r = 0; r < int(items[size_t(i)].next.size()); ++r) {
                ASSERT_TRUE(same_rows(x.mtp_logits(r), y.mtp_logits(r), nv))
                    << "round " << round << " seq " << i << " row " << r;
                ASSERT_TRUE(same_rows(x.mtp_hidden(r), y.mtp_hidden(r), d));
            }
        }
        // Chained: one row each, the head's own last hidden row as the input (read before the
        // pass writes its outputs).
        for (int i = 0; i < kSeqs; ++i) {
            MtpItem& it = items[size_t(i)];
            const int last = int(it.next.size()) - 1;
            next[size_t(i)].assign(1, token_id((7 * i + 3) % nv));
            it.next = next[size_t(i)];
            it.hidden = b[size_t(i)]->mtp_hidden(last);  // aliases the session's own output
        }
    }
    // Bad items: a session twice, a token out of range; nothing changes.
    const int before = b[0]->mtp_n_past();
    std::vector<MtpItem> twice = {items[0], items[0]};
    EXPECT_THROW(eval.eval_mtp(twice), Error);
    std::vector<token_id> bad = {token_id(nv)};
    std::vector<MtpItem> out_of_range = {items[1], {b[0].get(), bad, hidden[0].data()}};
    EXPECT_THROW(eval.eval_mtp(out_of_range), Error);
    EXPECT_EQ(b[0]->mtp_n_past(), before);
}

TEST(MtpBatch, HeadPassEqualsEachAlone) {
    expect_batched_head_equals_alone(kMtp);
    expect_batched_head_equals_alone(kMoeMtp);
}

TEST(MtpBatch, ModelWithoutTheHeadIsAnError) {
    const auto m = Model::load(kDir + "rand-qwen35-tok512-d128-l4-F16.gguf");
    ThreadPool pool(1);
    Session s(*m, params(&pool));
    const std::vector<token_id> t = {1};
    const std::vector<float> h(size_t(m->hparams().n_embd), 0.f);
    BatchEvaluator eval(*m, pool);
    const std::vector<MtpItem> items = {{&s, t, h.data()}};
    EXPECT_THROW(eval.eval_mtp(items), Error);
}

// Several steps of drafting + simulated verification, batched and alone.
TEST(MtpBatch, DraftBatchEqualsEachDrafterAlone) {
    const auto m = Model::load(kMoeMtp);
    const int nv = m->hparams().n_vocab;
    ThreadPool pool(2);
    struct Seq {
        std::unique_ptr<Session> ta, tb;
        std::unique_ptr<MtpDrafter> da, db;
        std::vector<token_id> hist;
    };
    std::vector<Seq> seqs(kSeqs);
    for (int i = 0; i < kSeqs; ++i) {
        Seq& s = seqs[size_t(i)];
        s.hist = test::random_tokens(5 + 2 * i, 60 + i);
        for (auto* t : {&s.ta, &s.tb}) {
            *t = std::make_unique<Session>(*m, params(&pool));
            (*t)->eval(std::span(s.hist).first(s.hist.size() - 1), /*all_logits=*/false);
        }
        s.da = std::make_unique<MtpDrafter>(*m, greedy());
        s.db = std::make_unique<MtpDrafter>(*m, greedy());
        s.da->attach(s.ta.get());
        s.db->attach(s.tb.get());
        s.da->begin(s.hist);
        s.db->begin(s.hist);
    }
    DraftBatch batch(&pool);
    std::vector<Draft> got(kSeqs), want(kSeqs);
    int total_rounds = 0, total_steps = 0;
    for (int step = 0; step < 6; ++step) {
        std::vector<DraftJob> jobs;
        for (int i = 0; i < kSeqs; ++i)
            jobs.push_back({seqs[size_t(i)].db.get(), seqs[size_t(i)].hist, 1 + (i + step) % 4,
                            &got[size_t(i)]});
        const int rounds = batch.propose(jobs);
        int longest = 0;
        for (int i = 0; i < kSeqs; ++i) {
            Seq& s = seqs[size_t(i)];
            const int steps = s.da->propose(s.hist, jobs[size_t(i)].n_max, want[size_t(i)]);
            ASSERT_EQ(got[size_t(i)].tokens, want[size_t(i)].tokens)
                << "step " << step << " seq " << i;
            ASSERT_EQ(jobs[size_t(i)].steps, steps);
            ASSERT_EQ(steps, want[size_t(i)].size());  // one head pass per draft token
            longest = std::max(longest, steps);
            total_steps += steps;
        }
        EXPECT_EQ(rounds, longest) << "step " << step;
        total_rounds += rounds;
        // Verification: keep (i + step) % (n + 1) drafts, then a correction of the target's.
        for (int i = 0; i < kSeqs; ++i) {
            Seq& s = seqs[size_t(i)];
            const std::vector<token_id>& d = want[size_t(i)].tokens;
            const int L = int(s.hist.size()) - 1, kept = (i + step) % (int(d.size()) + 1);
            std::vector<token_id> verify{s.hist.back()};
            verify.insert(verify.end(), d.begin(), d.end());
            for (Session* t : {s.ta.get(), s.tb.get()}) {
                t->eval(verify);
                t->rollback(L + 1 + kept);
            }
            s.da->accept(kept);
            s.db->accept(kept);
            s.hist.insert(s.hist.end(), d.begin(), d.begin() + kept);
            s.hist.push_back(token_id((kept < int(d.size()) ? d[size_t(kept)] + 1 : 5 * i) % nv));
        }
    }
    std::printf("mtp draft batch: %d head passes for %d sequence-steps\n", total_rounds,
                total_steps);
    EXPECT_LT(total_rounds, total_steps);
}

// The engine: 4 sequences stepped together with MTP drafting == plain greedy, and == each
// stepped alone (the same drafts kept). Also the head's time per draft round, 1 vs 4 sequences.
TEST(MtpBatch, EngineBatchedEqualsAloneAndPlain) {
    const auto m = Model::load(kMtp);
    ThreadPool pool(2);
    constexpr int kTokens = 32;
    struct Run {
        std::unique_ptr<Session> target;
        std::unique_ptr<Sampler> sampler;
        std::unique_ptr<MtpDrafter> drafter;
        Sequence seq;
    };
    const auto make = [&](int i, bool mtp) {
        auto r = std::make_unique<Run>();
        r->target = std::make_unique<Session>(*m, params(&pool));
        r->sampler = std::make_unique<Sampler>(greedy());
        if (mtp) r->drafter = std::make_unique<MtpDrafter>(*m, greedy());
        r->seq.target = r->target.get();
        r->seq.sampler = r->sampler.get();
        r->seq.drafter = r->drafter.get();
        r->seq.params.n_predict = kTokens;
        r->seq.params.ignore_eos = true;
        r->seq.params.n_draft = mtp ? 2 + i % 3 : 0;
        return r;
    };
    const auto prompt = [](int i) { return test::random_tokens(4 + 5 * i, 80 + i); };
    // Steps `runs` together to the end; the draft time per draft round.
    const auto run_all = [&](std::vector<std::unique_ptr<Run>>& runs, int first,
                             double* ms_per_round) {
        Engine engine(*m, &pool);
        std::vector<Sequence*> seqs;
        for (size_t i = 0; i < runs.size(); ++i) {
            engine.start(runs[i]->seq, prompt(first + int(i)));
            seqs.push_back(&runs[i]->seq);
        }
        double ms = 0;
        long rounds = 0;
        for (int guard = 0; guard < 1000; ++guard) {
            bool all_done = true;
            for (Sequence* s : seqs) all_done = all_done && s->done();
            if (all_done) break;
            const StepReport rep = engine.step(seqs);
            ms += rep.draft_ms;
            rounds += rep.draft_rounds;
        }
        if (ms_per_round) *ms_per_round = rounds > 0 ? ms / double(rounds) : 0;
    };
    std::vector<std::unique_ptr<Run>> batched;
    for (int i = 0; i < kSeqs; ++i) batched.push_back(make(i, true));
    double ms4 = 0, ms1 = 0;
    run_all(batched, 0, &ms4);
    for (int i = 0; i < kSeqs; ++i) {
        SCOPED_TRACE(i);
        std::vector<std::unique_ptr<Run>> alone, plain;
        alone.push_back(make(i, true));
        plain.push_back(make(i, false));
        double ms = 0;
        run_all(alone, i, &ms);
        ms1 += ms / kSeqs;
        run_all(plain, i, nullptr);
        const Sequence &b = batched[size_t(i)]->seq, &a = alone[0]->seq, &p = plain[0]->seq;
        ASSERT_EQ(p.output.size(), size_t(kTokens));
        EXPECT_EQ(b.output, p.output);
        EXPECT_EQ(a.output, p.output);
        EXPECT_GT(b.stats.n_drafted, 0);
        EXPECT_EQ(b.stats.n_drafted, a.stats.n_drafted);
        EXPECT_EQ(b.stats.n_accepted, a.stats.n_accepted);
    }
    std::printf("mtp head drafting per round: 1 sequence %.3f ms, %d sequences %.3f ms\n", ms1,
                kSeqs, ms4);
}

}  // namespace
