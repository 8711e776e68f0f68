// DFlash block drafters (speculative/drafters/dflash_head.h, dflash.h) on a random-weight drafter
// for a small qwen3 target (tests/data/dflash, scripts/models/dflash_draft.py): the block's draft
// logits and tokens against ik_llama.cpp's (scripts/models/make_dflash_refs.sh: after a prompt,
// then after a step that keeps two drafts); the drafts after verify passes against a
// recomputation from scratch; the block size bounding the draft; greedy speculative output equal to
// plain decoding; sampling keeping the target's distribution; drafters that do not fit their target
// refused naming the key and both files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "chi_square.h"
#include "common/error.h"
#include "gguf/gguf_writer.h"
#include "model/session.h"
#include "speculative/drafters/dflash.h"
#include "speculative/generator.h"
#include "test_util.h"

namespace {

using namespace specula;
using json = nlohmann::json;

const std::string kDir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/dflash/";
const std::string kTarget = kDir + "rand-qwen3-tok512-d128-l4-F16.gguf";
const std::string kStem = "rand-dflash-qwen3-tok512-d128-l2-b8-F16";
const std::string kDraft = kDir + kStem + ".gguf";
// |logit - ik_llama.cpp's|: its draft caches its keys and values in F16 (flash attention), and
// the target's features differ by its F16 matmuls' rounding.
constexpr double kTol = 0.06;

SessionParams capturing(const DFlashHead& h) {
    SessionParams p;
    p.n_ctx = 256;
    p.n_threads = 1;
    p.capture_layers = h.capture;
    return p;
}

SamplingParams greedy() {
    SamplingParams p;
    p.temp = 0.f;
    return p;
}

int argmax(const float* x, int n) {
    return int(std::max_element(x, x + n) - x);
}

// One block's rows against ik_llama.cpp's top-10 per row; its drafts where ik_llama.cpp's top two
// are further apart than the tolerance allows to swap. Returns the largest logit difference.
double expect_rows_near(const DFlashState& st, const Draft& d, const json& rows, const json& drafts,
                        int nv, const std::string& what) {
    double max_err = 0;
    EXPECT_EQ(d.size(), int(rows.size())) << what;
    for (size_t r = 0; r < rows.size() && int(r) < d.size(); ++r) {
        const float* got = st.logits.data() + size_t(nv) * r;
        for (const json& e : rows[r])
            max_err =
                std::max(max_err, std::abs(double(got[e[0].get<int>()]) - e[1].get<double>()));
        const double gap = rows[r][0][1].get<double>() - rows[r][1][1].get<double>();
        if (gap > 2 * kTol) {
            EXPECT_EQ(d.tokens[r], drafts[r].get<token_id>()) << what << " row " << r;
        }
    }
    EXPECT_LT(max_err, kTol) << what;
    return max_err;
}

TEST(DFlash, BlockDraftsMatchIkLlamaCpp) {
    const auto m = Model::load(kTarget);
    const auto head = DFlashHead::load(kDraft, *m);
    const int nv = m->hparams().n_vocab;
    EXPECT_EQ(head->block_size, 8);
    EXPECT_EQ(head->mask_token, 7);
    EXPECT_EQ(head->capture, (std::vector<int>{0, 2}));
    for (int k : {7, 3}) {
        const json ref =
            json::parse(test::read_file(kDir + kStem + ".k" + std::to_string(k) + ".json"));
        ASSERT_EQ(ref["k"].get<int>(), k);
        double worst = 0;
        for (const json& p : ref["prompts"]) {
            auto history = p["tokens"].get<std::vector<token_id>>();
            const std::string what =
                "k" + std::to_string(k) + " n" + std::to_string(history.size());
            Session s(*m, capturing(*head));
            s.eval(history);
            ASSERT_EQ(argmax(s.logits(s.n_logits() - 1), nv), p["next"].get<int>()) << what;
            history.push_back(p["next"].get<token_id>());
            DFlashDrafter drafter(*head, greedy(), 256);
            drafter.attach(&s);
            drafter.begin(history);
            Draft d;
            EXPECT_EQ(drafter.propose(history, k, d), 1);
            worst = std::max(worst, expect_rows_near(drafter.state(), d, p["rows"], p["drafts"], nv,
                                                     what + " step 1"));
            // The target evaluates [next, ik's d_1, d_2] and keeps both drafts.
            const std::vector<token_id> step = {history.back(), p["drafts"][0].get<token_id>(),
                                                p["drafts"][1].get<token_id>()};
            s.eval(step);
            drafter.accept(2);
            ASSERT_EQ(argmax(s.logits(2), nv), p["next2"].get<int>()) << what;
            history.insert(history.end(), step.begin() + 1, step.end());
            history.push_back(p["next2"].get<token_id>());
            EXPECT_EQ(drafter.propose(history, k, d), 1);
            worst = std::max(worst, expect_rows_near(drafter.state(), d, p["rows2"], p["drafts2"],
                                                     nv, what + " step 2"));
        }
        std::printf("k=%d: max |logit - ik_llama.cpp| = %.2e\n", k, worst);
    }
}

// The greedy block a fresh session and drafter give for `history` (the whole history but its last
// token evaluated in one pass: the context starts at position 0).
std::vector<token_id> recomputed(const Model& m, const DFlashHead& h,
                                 const std::vector<token_id>& history, int k) {
    Session s(m, capturing(h));
    s.eval(std::span(history).first(history.size() - 1));
    DFlashDrafter d(h, greedy(), 256);
    d.attach(&s);
    d.begin(history);
    Draft out;
    d.propose(history, k, out);
    return out.tokens;
}

// After verify passes that keep some drafts (and correct the rest), the drafter's context follows
// the history: its drafts equal a recomputation from scratch, bit for bit; the block size bounds
// the draft (block 8: at most 7 tokens).
TEST(DFlash, DraftsAfterVerifyEqualARecomputation) {
    const auto m = Model::load(kTarget);
    const auto head = DFlashHead::load(kDraft, *m);
    std::vector<token_id> history = {1, 291, 410, 456, 425, 417, 340, 268, 420};
    Session s(*m, capturing(*head));
    s.eval(history);
    history.push_back(300);
    DFlashDrafter drafter(*head, greedy(), 256);
    drafter.attach(&s);
    drafter.begin(history);
    Draft draft;
    const int nv = m->hparams().n_vocab;
    for (const auto& [k, kept] :
         std::vector<std::pair<int, int>>{{3, 1}, {12, 0}, {2, 2}, {5, 3}, {7, 7}}) {
        drafter.propose(history, k, draft);
        ASSERT_EQ(draft.size(), std::min(k, 7));
        EXPECT_EQ(draft.tokens, recomputed(*m, *head, history, k)) << "after " << history.size();
        // The target verifies [last, drafts], keeps `kept` of them and adds its own token.
        std::vector<token_id> batch{history.back()};
        batch.insert(batch.end(), draft.tokens.begin(), draft.tokens.end());
        s.eval(batch);
        s.rollback(int(history.size()) + kept);
        drafter.accept(kept);
        history.insert(history.end(), draft.tokens.begin(), draft.tokens.begin() + kept);
        history.push_back(token_id((history.back() * 7 + 3) % nv));
    }
}

TEST(DFlash, GreedySpeculativeEqualsPlain) {
    const auto m = Model::load(kTarget);
    const auto head = DFlashHead::load(kDraft, *m);
    const std::vector<token_id> prompt = {1, 291, 410, 456, 425, 417, 340, 268, 420, 327, 416};
    GenParams gp;
    gp.n_predict = 40;
    gp.ignore_eos = true;
    Sampler plain_sampler(greedy());
    Session plain(*m, capturing(*head));
    gp.n_draft = 0;
    const auto want = generate_tokens(plain, plain_sampler, nullptr, prompt, gp);
    for (int n_draft : {1, 4, 12}) {
        Session s(*m, capturing(*head));
        Sampler sampler(greedy());
        DFlashDrafter drafter(*head, greedy(), 256);
        gp.n_draft = n_draft;
        gp.trace = true;
        SpecStats st;
        EXPECT_EQ(generate_tokens(s, sampler, &drafter, prompt, gp, &st), want) << n_draft;
        EXPECT_GT(st.n_drafted, 0);
        for (const auto& step : st.trace) EXPECT_LE(step.drafted.size(), 7u) << n_draft;
    }
}

// Sampling with DFlash drafts keeps the target's distribution: the first two generated tokens,
// with blocks of 3 and rejection sampling over fresh seeds, follow p(t1) p(t2 | t1) (chi-square).
TEST(DFlash, SamplingKeepsTheTargetDistribution) {
    const auto m = Model::load(kTarget);
    const auto head = DFlashHead::load(kDraft, *m);
    const int nv = m->hparams().n_vocab;
    SamplingParams sp;
    sp.temp = 3.0f;  // the random target's logits are peaked
    sp.top_k = 8;
    const std::vector<token_id> prompt = {1, 291, 410, 456, 425};
    std::map<std::pair<token_id, token_id>, double> exact;
    {
        Sampler smp(sp);
        Session sess(*m, capturing(*head));
        std::vector<TokenProb> p1, p2;
        sess.eval(prompt);
        smp.distribution(sess.logits(sess.n_logits() - 1), nv, p1);
        for (const TokenProb& a : p1) {
            sess.rollback(int(prompt.size()));
            sess.eval(std::vector<token_id>{a.id});
            smp.distribution(sess.logits(0), nv, p2);
            for (const TokenProb& b : p2) exact[{a.id, b.id}] = double(a.p) * b.p;
        }
    }
    const int kTrials = 600;  // ~6 ms a trial under ASan
    std::map<std::pair<token_id, token_id>, long> counts;
    Session target(*m, capturing(*head));
    SamplingParams dsp = sp;
    dsp.seed = 77;
    DFlashDrafter drafter(*head, dsp, 256);
    long drafted = 0;
    for (int t = 0; t < kTrials; ++t) {
        sp.seed = 9000 + uint64_t(t);
        Sampler sampler(sp);
        GenParams gp;
        gp.n_predict = 2;
        gp.ignore_eos = true;
        gp.n_draft = 3;
        SpecStats st;
        const auto out = generate_tokens(target, sampler, &drafter, prompt, gp, &st);
        ASSERT_EQ(out.size(), 2u);
        ++counts[{out[0], out[1]}];
        drafted += st.n_drafted;
    }
    EXPECT_GE(drafted, kTrials);
    const test::ChiSquare c = test::chi_square(exact, counts, kTrials);
    std::printf("dflash sampling: chi2 = %.1f, df = %d, critical = %.1f\n", c.stat, c.df,
                c.critical);
    ASSERT_GE(c.df, 5);
    EXPECT_LT(c.stat, c.critical);
}

// A copy of the drafter with some keys set (after the copied ones) and one key or tensor left out.
std::string rewrite(const std::string& name, const std::function<void(GGUFWriter&)>& keys,
                    const std::string& drop_key = "", const std::string& drop_tensor = "") {
    const auto f = GGUFFile::open(kDraft);
    GGUFWriter w;
    for (const auto& [k, v] : f->metadata())
        if (k != drop_key) w.set(k, v);
    if (keys) keys(w);
    for (const auto& t : f->tensors())
        if (t.name != drop_tensor) w.add_tensor(t.name, t.ne, t.type, t.data, t.nbytes);
    const std::string path = test::temp_dir("dflash") + "/" + name + ".gguf";
    w.write(path);
    return path;
}

// load throws an Error whose message names every one of `words`.
void expect_refused(const std::string& draft, const Model& target,
                    const std::vector<std::string>& words) {
    try {
        DFlashHead::load(draft, target);
        ADD_FAILURE() << draft << " was accepted";
    } catch (const Error& e) {
        for (const auto& w : words)
            EXPECT_NE(std::string(e.what()).find(w), std::string::npos)
                << "'" << w << "' not in: " << e.what();
    }
}

TEST(DFlash, DraftersThatDoNotFitAreRefused) {
    const auto m = Model::load(kTarget);
    const std::string tp = m->file().path();
    const std::string pre = "dflash-draft.dflash.";
    for (uint32_t b : {0u, 1u}) {
        const std::string p = rewrite("block" + std::to_string(b),
                                      [&](GGUFWriter& w) { w.set_u32(pre + "block_size", b); });
        expect_refused(p, *m, {pre + "block_size", p, "is " + std::to_string(b)});
    }
    // Layer ids outside 0 .. n_layer - 2 (the target has 4 layers), or listed twice.
    for (const auto& l :
         {std::vector<int32_t>{2, 3}, std::vector<int32_t>{-1, 0}, std::vector<int32_t>{2, 2}}) {
        const std::string p =
            rewrite("layers" + std::to_string(l[0]) + std::to_string(l[1]),
                    [&](GGUFWriter& w) { w.set_i32_array(pre + "target_layer_ids", l); });
        expect_refused(p, *m, {pre + "target_layer_ids", p, l[0] == l[1] ? "twice" : tp});
    }
    const std::string nf =
        rewrite("features", [&](GGUFWriter& w) { w.set_u32(pre + "n_target_features", 384); });
    expect_refused(nf, *m, {pre + "n_target_features", nf, tp, "384"});
    const std::string mask =
        rewrite("mask", [&](GGUFWriter& w) { w.set_u32(pre + "mask_token_id", 512); });
    expect_refused(mask, *m, {pre + "mask_token_id", mask, tp, "512"});
    const std::string vocab = rewrite("vocab", [](GGUFWriter& w) {
        w.set_string_array("tokenizer.ggml.tokens", std::vector<std::string>(300, "x"));
    });
    expect_refused(vocab, *m, {"tokenizer.ggml.tokens", vocab, tp, "300"});
    const std::string nolayers = rewrite("nolayers", nullptr, pre + "target_layer_ids");
    expect_refused(nolayers, *m, {pre + "target_layer_ids", nolayers});
    // The drafter for another target: a wider one (d256).
    const auto wide = Model::load(std::string(SPECULA_SOURCE_DIR) +
                                  "/tests/data/arch/rand-qwen3-tok512-d256-l2-F16.gguf");
    expect_refused(kDraft, *wide,
                   {"dflash-draft.embedding_length", kDraft, wide->file().path(), "256"});
}

}  // namespace
