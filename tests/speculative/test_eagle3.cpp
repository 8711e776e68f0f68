// EAGLE-3 heads (speculative/drafters/eagle3_head.h, eagle3.h) on random-weight heads for the
// TinyStories targets (tests/data/eagle3, scripts/models/eagle3_head.py): the head's draft logits
// (first pass over the prompt's captured hidden states, then chained on its own output) against
// an independent float64 numpy forward of target and head; the drafter's drafts after verify
// passes against a recomputation from scratch; greedy speculative output equal to plain decoding;
// sampling keeping the target's distribution; heads that do not fit their target refused naming
// the key and both files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "chi_square.h"
#include "common/error.h"
#include "gguf/gguf_writer.h"
#include "model/session.h"
#include "speculative/config.h"
#include "speculative/drafters/eagle3.h"
#include "speculative/generator.h"
#include "test_util.h"

namespace {

using namespace specula;
using json = nlohmann::json;

const std::string kDir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/eagle3/";
const char* kHeads[] = {"stories260K-eagle3", "llama2xs-eagle3"};

json reference(const std::string& stem) {
    return json::parse(test::read_file(kDir + stem + ".json"));
}

SessionParams capturing(const Eagle3Head& h) {
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

// `got` (the target's vocabulary) against a reference row: the same tokens outside the head's
// vocabulary (-inf / null), the others within a tolerance of the row's scale.
void expect_logits_near(const float* got, const json& want, const std::string& what) {
    double max_err = 0, scale = 1;
    for (size_t v = 0; v < want.size(); ++v) {
        if (want[v].is_null()) {
            EXPECT_TRUE(std::isinf(got[v]) && got[v] < 0) << what << " token " << v;
            continue;
        }
        const double w = want[v].get<double>();
        scale = std::max(scale, std::abs(w));
        max_err = std::max(max_err, std::abs(double(got[v]) - w));
    }
    std::printf("%s: max |logit - float64| = %.2e (scale %.2f)\n", what.c_str(), max_err, scale);
    EXPECT_LT(max_err, 2e-3 * scale) << what;
}

TEST(Eagle3, HeadLogitsMatchTheFloat64Reference) {
    for (const char* stem : kHeads) {
        SCOPED_TRACE(stem);
        const json r = reference(stem);
        const auto target = Model::load(test::shared_path(r["target"]));
        const auto head = Eagle3Head::load(kDir + stem + ".gguf", *target);
        const auto prompt = r["prompt"].get<std::vector<token_id>>();
        Session s(*target, capturing(*head));
        s.eval(prompt);
        ASSERT_EQ(s.n_captured(), int(prompt.size()));
        // The first pass: position p takes [t_{p+1}, fc(features of p)].
        const size_t td = size_t(head->target_embd), w = size_t(head->n_features());
        std::vector<float> feat(w * prompt.size());
        for (size_t p = 0; p < prompt.size(); ++p)
            for (size_t k = 0; k < head->column.size(); ++k)
                std::memcpy(feat.data() + w * p + td * k,
                            s.captured(int(p)) + td * size_t(head->column[k]), sizeof(float) * td);
        ThreadPool pool(1);
        Eagle3State st(*head, 256, KVType::F32, KVType::F32);
        eagle3_encode(*head, st, feat.data(), int64_t(w), int(prompt.size()), pool);
        std::vector<token_id> next(prompt.begin() + 1, prompt.end());
        next.push_back(r["next"].get<token_id>());
        eagle3_decode(*head, st, next, st.g.data(), 0, pool);
        const json& steps = r["steps"];
        std::vector<token_id> drafts;
        size_t row = next.size() - 1;
        for (size_t i = 0; i < steps.size(); ++i) {
            expect_logits_near(st.logits.data(), steps[i]["logits"],
                               std::string(stem) + " step " + std::to_string(i));
            drafts.push_back(steps[i]["draft"].get<token_id>());
            const std::vector<float> g(st.hidden.begin() + ptrdiff_t(td * row),
                                       st.hidden.begin() + ptrdiff_t(td * (row + 1)));
            eagle3_decode(*head, st, std::vector<token_id>{drafts.back()}, g.data(), st.kv.n_past(),
                          pool);
            row = 0;
        }
        // --draft-p-min above every row's top probability: no draft.
        Eagle3Drafter picky(*head, greedy(), 256, KVType::F32, KVType::F32, /*p_min=*/1.0f);
        picky.attach(&s);
        std::vector<token_id> h = prompt;
        h.push_back(r["next"].get<token_id>());
        picky.begin(h);
        Draft none;
        picky.propose(h, 3, none);
        EXPECT_EQ(none.size(), 0);
        // The drafter, on the same target session, drafts the reference's greedy chain.
        Eagle3Drafter drafter(*head, greedy(), 256);
        drafter.attach(&s);
        std::vector<token_id> history = prompt;
        history.push_back(r["next"].get<token_id>());
        drafter.begin(history);
        Draft d;
        EXPECT_EQ(drafter.propose(history, int(drafts.size()), d), int(drafts.size()));
        EXPECT_EQ(d.tokens, drafts);
    }
}

// The greedy chain a fresh session and drafter give for `history` (the whole history but its last
// token evaluated in one pass: the head's cache starts at position 0).
std::vector<token_id> recomputed(const Model& m, const Eagle3Head& h,
                                 const std::vector<token_id>& history, int k) {
    Session s(m, capturing(h));
    s.eval(std::span(history).first(history.size() - 1));
    Eagle3Drafter d(h, greedy(), 256);
    d.attach(&s);
    d.begin(history);
    Draft out;
    d.propose(history, k, out);
    return out.tokens;
}

// After verify passes that keep some drafts (and correct the rest), the drafter's head cache
// follows the history: its drafts equal a recomputation from scratch, bit for bit.
TEST(Eagle3, DraftsAfterVerifyEqualARecomputation) {
    const json r = reference(kHeads[1]);
    const auto m = Model::load(test::shared_path(r["target"]));
    const auto head = Eagle3Head::load(kDir + kHeads[1] + ".gguf", *m);
    std::vector<token_id> history = r["prompt"].get<std::vector<token_id>>();
    Session s(*m, capturing(*head));
    s.eval(history);
    history.push_back(r["next"].get<token_id>());
    Eagle3Drafter drafter(*head, greedy(), 256);
    drafter.attach(&s);
    drafter.begin(history);
    Draft draft;
    const int nv = m->hparams().n_vocab;
    for (const auto& [k, kept] : std::vector<std::pair<int, int>>{{3, 1}, {4, 0}, {2, 2}, {3, 3}}) {
        drafter.propose(history, k, draft);
        ASSERT_EQ(draft.size(), k);
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

TEST(Eagle3, GreedySpeculativeEqualsPlain) {
    for (const char* stem : kHeads) {
        SCOPED_TRACE(stem);
        const json r = reference(stem);
        const auto m = Model::load(test::shared_path(r["target"]));
        const auto head = Eagle3Head::load(kDir + stem + ".gguf", *m);
        const auto prompt = r["prompt"].get<std::vector<token_id>>();
        GenParams gp;
        gp.n_predict = 48;
        gp.ignore_eos = true;
        Sampler plain_sampler(greedy());
        Session plain(*m, capturing(*head));
        gp.n_draft = 0;
        const auto want = generate_tokens(plain, plain_sampler, nullptr, prompt, gp);
        for (int n_draft : {1, 3, 6}) {
            Session s(*m, capturing(*head));
            Sampler sampler(greedy());
            Eagle3Drafter drafter(*head, greedy(), 256);
            gp.n_draft = n_draft;
            SpecStats st;
            EXPECT_EQ(generate_tokens(s, sampler, &drafter, prompt, gp, &st), want) << n_draft;
            EXPECT_GT(st.n_drafted, 0);
        }
    }
}

// Sampling with EAGLE-3 drafts keeps the target's distribution: the first two generated tokens,
// with drafts of 3 and rejection sampling over fresh seeds, follow p(t1) p(t2 | t1) (chi-square).
TEST(Eagle3, SamplingKeepsTheTargetDistribution) {
    const json r = reference(kHeads[1]);
    const auto m = Model::load(test::shared_path(r["target"]));
    const auto head = Eagle3Head::load(kDir + kHeads[1] + ".gguf", *m);
    const int nv = m->hparams().n_vocab;
    SamplingParams sp;
    sp.temp = 1.5f;
    sp.top_k = 40;
    const auto prompt = r["prompt"].get<std::vector<token_id>>();
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
    const int kTrials = 1500;
    std::map<std::pair<token_id, token_id>, long> counts;
    Session target(*m, capturing(*head));
    SamplingParams dsp = sp;
    dsp.seed = 77;
    Eagle3Drafter drafter(*head, dsp, 256);
    long drafted = 0, accepted = 0;
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
        accepted += st.n_accepted;
    }
    EXPECT_GE(drafted, kTrials);
    const test::ChiSquare c = test::chi_square(exact, counts, kTrials);
    std::printf("eagle3 sampling: chi2 = %.1f, df = %d, critical = %.1f, accepted %ld of %ld\n",
                c.stat, c.df, c.critical, accepted, drafted);
    ASSERT_GE(c.df, 5);
    EXPECT_LT(c.stat, c.critical);
}

// What rewrite() changes in a copy of a head.
struct Edit {
    std::function<void(GGUFWriter&)> keys;  // sets keys (after the copied ones)
    std::string drop_key, drop_tensor;      // left out
    std::function<void(const GGUFTensor&, std::string&)> patch;  // a tensor's bytes
};

std::string rewrite(const std::string& src, const std::string& name, const Edit& e) {
    const auto f = GGUFFile::open(src);
    GGUFWriter w;
    for (const auto& [k, v] : f->metadata())
        if (k != e.drop_key) w.set(k, v);
    if (e.keys) e.keys(w);
    for (const auto& t : f->tensors()) {
        if (t.name == e.drop_tensor) continue;
        std::string bytes(reinterpret_cast<const char*>(t.data), t.nbytes);
        if (e.patch) e.patch(t, bytes);
        w.add_tensor(t.name, t.ne, t.type, bytes.data(), bytes.size());
    }
    const std::string path = test::temp_dir("eagle3") + "/" + name + ".gguf";
    w.write(path);
    return path;
}

// load throws an Error whose message names every one of `words`.
void expect_refused(const std::string& head, const Model& target,
                    const std::vector<std::string>& words) {
    try {
        Eagle3Head::load(head, target);
        ADD_FAILURE() << head << " was accepted";
    } catch (const Error& e) {
        for (const auto& w : words)
            EXPECT_NE(std::string(e.what()).find(w), std::string::npos)
                << "'" << w << "' not in: " << e.what();
    }
}

TEST(Eagle3, HeadsThatDoNotFitAreRefused) {
    const std::string src = kDir + std::string(kHeads[0]) + ".gguf";
    const auto m = Model::load(test::shared_path("models/tinystories/stories260K.gguf"));
    const std::string tp = m->file().path();
    // Layer ids outside 1 .. n_layer - 1 (stories260K has 5 layers).
    for (const auto& l : {std::vector<int32_t>{1, 2, 5}, std::vector<int32_t>{0, 2, 4}}) {
        const std::string p =
            rewrite(src, "layers" + std::to_string(l[0]),
                    {[l](GGUFWriter& w) { w.set_i32_array("eagle3.target_layers", l); }});
        expect_refused(p, *m, {"eagle3.target_layers", p, tp, "outside 1..4"});
    }
    // Another hidden size.
    const std::string wide =
        rewrite(src, "wide", {[](GGUFWriter& w) { w.set_u32("eagle3.target_hidden_size", 128); }});
    expect_refused(wide, *m, {"eagle3.target_hidden_size", wide, tp});
    // The head for another target: a wider one.
    const auto other =
        Model::load(test::shared_path("models/synthetic/rand-llama-tok512-d256-l2-F32.gguf"));
    expect_refused(src, *other, {"eagle3.target_hidden_size", src, other->file().path()});
    // A smaller vocabulary without d2t, and a d2t id outside the target's vocabulary.
    const std::string no_d2t = rewrite(src, "nod2t", {.drop_tensor = "d2t"});
    expect_refused(no_d2t, *m, {"d2t", no_d2t, tp, "200 output rows"});
    const std::string bad_d2t =
        rewrite(src, "badd2t", {.patch = [](const GGUFTensor& t, std::string& b) {
                    if (t.name != "d2t") return;
                    const int64_t id = 600;
                    std::memcpy(b.data() + 8, &id, 8);
                }});
    expect_refused(bad_d2t, *m, {"d2t", bad_d2t, tp, "600"});
    // No layer key at all (neither spelling).
    const std::string no_layers = rewrite(src, "nolayers", {.drop_key = "eagle3.target_layers"});
    expect_refused(no_layers, *m, {"eagle3.target_layers", "eagle3.extract_layers", no_layers});
    // --spec-type eagle3 without a head.
    SpeculativeFlags fl;
    fl.spec_type = "draft-eagle3";
    EXPECT_THROW(parse_speculative_flags(fl), Error);
    fl.model_draft = src;
    EXPECT_EQ(parse_speculative_flags(fl).method, SpecMethod::eagle3);
    fl = SpeculativeFlags{};
    fl.speculative_config = R"({"method": "eagle3", "model": ")" + src + "\"}";
    const SpeculativeConfig c = parse_speculative_flags(fl);
    EXPECT_EQ(c.method, SpecMethod::eagle3);
    EXPECT_EQ(c.draft_model, src);
}

}  // namespace
