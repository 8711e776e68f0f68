// Gemma 4's assistant (speculative/drafters/gemma4_assistant_head.h, gemma4_assistant.h) on the
// random-weight files of scripts/models/arch_gemma4_assistant.py, drafting for
// rand-gemma4-tok512-d128-l6-F16 (sliding and full layers, the last two sharing KV):
//   - its draft logits against ik_llama.cpp's (tests/data/arch/mtp/<assistant>.k<K>.json from
//     scripts/models/make_mtp_refs.sh: the target evaluates each prompt, the assistant drafts K
//     tokens greedily; the drafts and the top-10 logits of the last draft row), in both schemas
//     (gemma4-assistant K = 1..3, gemma4_mtp K = 3);
//   - greedy speculative output equal to plain decoding with either file, sampling that keeps the
//     target's distribution, and drafts read from the right row of the target's last pass (an
//     "echo" assistant);
//   - an assistant for another target refused naming the key or tensor and both files.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "arch_parity.h"
#include "chi_square.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/session.h"
#include "parity_util.h"
#include "speculative/drafters/gemma4_assistant.h"
#include "speculative/generator.h"
#include "test_util.h"

namespace {

using namespace specula;
using json = nlohmann::json;

const std::string kTarget = test::kArchDataDir + "/rand-gemma4-tok512-d128-l6-F16.gguf";
const std::string kAssistant = test::kArchDataDir + "/rand-gemma4-assistant-tok512-d64-l2-F16.gguf";
const std::string kMtp = test::kArchDataDir + "/rand-gemma4-mtp-tok512-d64-l2-F16.gguf";

SessionParams target_params() {
    SessionParams p;
    p.n_ctx = 512;
    p.n_threads = 2;
    // ik_llama.cpp's references ran -ctk f16 -ctv f16 with flash attention (Q rounded to F16);
    // an F32 K cache here keeps Specula's side nearer the exact values (max|d| 0.043; 0.095 with
    // F16 K: both engines' roundings add up), as test_mtp_parity does.
    p.type_k = KVType::F32;
    p.type_v = KVType::F16;
    p.keep_hidden = true;
    return p;
}

// The references ran ik_llama.cpp's flash attention (its gemma4 graph is right only there): twice
// the F16 tolerance, as tests/util/arch_parity.h gives its gemma4 references.
constexpr double kTol = 0.06;

struct Ref {
    std::string stem;
    int k;
    json j;
};

// One prompt of every reference: the target evaluates it once, each assistant drafts from it.
void check_prompt(const Model& target, const std::vector<const Gemma4Assistant*>& assistants,
                  const std::vector<Ref>& refs, size_t p, test::Stats& st) {
    const std::vector<token_id> toks =
        refs[0].j["prompts"][p]["tokens"].get<std::vector<token_id>>();
    const int n = int(toks.size()), nv = target.hparams().n_vocab;
    Session s(target, target_params());
    s.eval(toks);
    const token_id next = token_id(test::argmax(s.logits(n - 1), nv));
    for (size_t r = 0; r < refs.size(); ++r) {
        const json& jp = refs[r].j["prompts"][p];
        SCOPED_TRACE(refs[r].stem + " k=" + std::to_string(refs[r].k) + " prompt " +
                     std::to_string(p));
        ASSERT_EQ(jp["tokens"].get<std::vector<token_id>>(), toks);
        EXPECT_EQ(next, jp["next"].get<token_id>());
        const auto drafts = jp["drafts"].get<std::vector<token_id>>();
        ASSERT_EQ(int(drafts.size()), refs[r].k);
        const Gemma4Assistant& a = *assistants[r];
        Gemma4AssistantState as;
        std::vector<float> h(s.hidden(n - 1), s.hidden(n - 1) + a.n_backbone);
        token_id in = next;
        for (int i = 0; i < refs[r].k; ++i) {
            gemma4_assistant_step(a, as, s.kv(), n, in, h.data(), s.pool());
            in = token_id(test::argmax(as.logits.data(), nv));
            EXPECT_EQ(in, drafts[size_t(i)]) << "draft " << i + 1;
            if (i == refs[r].k - 1)
                test::compare_row(as.logits.data(), nv, jp["last"], kTol, "last draft row", st);
            h = as.hidden;
        }
    }
}

// The first prompt of the references (general.json's first, 53 tokens): its greedy continuation
// repeats tokens (295 295 295, 353 133 353 133) within 30 tokens.
std::vector<token_id> greedy(Session& s, Drafter* d, int n_draft, SpecStats* st = nullptr) {
    const json ref = json::parse(test::read_file(
        test::kArchDataDir + "/mtp/rand-gemma4-assistant-tok512-d64-l2-F16.k1.json"));
    const auto prompt = ref["prompts"][0]["tokens"].get<std::vector<token_id>>();
    SamplingParams sp;
    sp.temp = 0.f;
    GenParams gp;
    gp.n_predict = 40;
    gp.ignore_eos = true;
    gp.n_draft = n_draft;
    Sampler sampler(sp);
    return generate_tokens(s, sampler, d, prompt, gp, st);
}

// Records, for each proposal, the history's last token and the first draft.
class Recorder final : public Drafter {
  public:
    explicit Recorder(Drafter& d) : d_(d) {}
    const char* name() const override { return d_.name(); }
    void attach(Session* t) override { d_.attach(t); }
    void begin(std::span<const token_id> prompt) override { d_.begin(prompt); }
    std::span<const token_id> start(std::span<const token_id> history, int n_max,
                                    Draft& out) override {
        d_.start(history, n_max, out);
        if (out.size() > 0) firsts.push_back({history.back(), out.tokens[0]});
        return {};
    }
    void accept(int n_kept) override { d_.accept(n_kept); }
    int steps() const override { return d_.steps(); }
    std::vector<std::pair<token_id, token_id>> firsts;

  private:
    Drafter& d_;
};

// A copy of `src` with one key set (a u32), or with token_embd cut to its first `rows` rows.
std::string mutated(const std::string& src, const std::string& key, uint32_t v, int64_t rows = 0) {
    const auto f = GGUFFile::open(src);
    GGUFWriter w;
    for (const auto& [k, val] : f->metadata()) w.set(k, val);
    if (!key.empty()) w.set_u32(key, v);
    for (const auto& t : f->tensors()) {
        if (rows > 0 && t.name == "token_embd.weight")
            w.add_tensor(t.name, {t.ne[0], rows}, t.type, t.data, t.nbytes / t.ne[1] * rows);
        else
            w.add_tensor(t.name, t.ne, t.type, t.data, t.nbytes);
    }
    const std::string path = test::temp_dir("gemma4_assistant") + "/" +
                             (key.empty() ? "rows" : key) + std::to_string(v + rows) + ".gguf";
    w.write(path);
    return path;
}

}  // namespace

TEST(Gemma4Assistant, DraftLogitsMatchIkLlamaCpp) {
    const auto target = Model::load(kTarget);
    const auto assistant = Gemma4Assistant::load(kAssistant, *target);
    const auto mtp = Gemma4Assistant::load(kMtp, *target);
    // The sliding layer reads target layer 2, the full one layer 3 (4 and 5 share their KV).
    ASSERT_EQ(assistant->layers.size(), 2u);
    EXPECT_EQ(assistant->layers[0].kv_layer, 2);
    EXPECT_EQ(assistant->layers[1].kv_layer, 3);
    std::vector<Ref> refs;
    std::vector<const Gemma4Assistant*> which;
    for (const auto& [stem, k, a] :
         {std::tuple{std::string("rand-gemma4-assistant-tok512-d64-l2-F16"), 1, assistant.get()},
          {std::string("rand-gemma4-assistant-tok512-d64-l2-F16"), 2, assistant.get()},
          {std::string("rand-gemma4-assistant-tok512-d64-l2-F16"), 3, assistant.get()},
          {std::string("rand-gemma4-mtp-tok512-d64-l2-F16"), 3, mtp.get()}}) {
        json j = json::parse(test::read_file(test::kArchDataDir + "/mtp/" + stem + ".k" +
                                             std::to_string(k) + ".json"));
        ASSERT_EQ(j["format"], "ik-mtp-dump/1");
        ASSERT_EQ(j["k"].get<int>(), k);
        refs.push_back({stem, k, std::move(j)});
        which.push_back(a);
    }
    test::Stats st;
    const size_t n_prompts = refs[0].j["prompts"].size();
    ASSERT_GE(n_prompts, 3u);
    for (size_t p = 0; p < n_prompts; ++p) check_prompt(*target, which, refs, p, st);
    std::printf("[gemma4 assistant parity] rows %d max|d| %.3g argmax checks %d\n", st.n_rows,
                st.max_diff, st.n_argmax_checked);
    EXPECT_EQ(st.n_failures, 0);
    EXPECT_EQ(st.n_rows, int(4 * n_prompts));
}

// Both schemas through the engine, at two draft lengths (the target's sessions keep their final
// hidden rows: SessionParams::keep_hidden).
TEST(Gemma4Assistant, GreedySpeculativeEqualsPlain) {
    const auto target = Model::load(kTarget);
    Session s(*target, target_params());
    const auto plain = greedy(s, nullptr, 0);
    SamplingParams greedy_sampling;
    greedy_sampling.temp = 0.f;
    for (const std::string& file : {kAssistant, kMtp}) {
        const auto a = Gemma4Assistant::load(file, *target);
        Gemma4AssistantDrafter drafter(*a, greedy_sampling);
        for (int n_draft : {1, 3}) {
            SpecStats st;
            EXPECT_EQ(greedy(s, &drafter, n_draft, &st), plain) << file << " " << n_draft;
            EXPECT_GT(st.n_drafted, 0);
            EXPECT_EQ(st.drafter, "gemma4-assistant");
        }
    }
}

// Sampling with the assistant's drafts keeps the target's distribution: the first two generated
// tokens, with drafts of 3 drawn from the assistant's q and rejection sampling over fresh seeds,
// follow p(t1) p(t2 | t1) (chi-square).
TEST(Gemma4Assistant, SamplingKeepsTheTargetDistribution) {
    const auto m = Model::load(kTarget);
    const auto a = Gemma4Assistant::load(kAssistant, *m);
    const int nv = m->hparams().n_vocab;
    SamplingParams sp;
    sp.temp = 3.0f;  // the random target's logits are peaked
    sp.top_k = 8;
    const std::vector<token_id> prompt = {1, 291, 410, 456, 425};
    std::map<std::pair<token_id, token_id>, double> exact;
    {
        Sampler smp(sp);
        Session sess(*m, target_params());
        std::vector<TokenProb> p1, p2;
        sess.eval(prompt);
        smp.distribution(sess.logits(sess.n_logits() - 1), nv, p1);
        for (const TokenProb& t1 : p1) {
            sess.rollback(int(prompt.size()));
            sess.eval(std::vector<token_id>{t1.id});
            smp.distribution(sess.logits(0), nv, p2);
            for (const TokenProb& t2 : p2) exact[{t1.id, t2.id}] = double(t1.p) * t2.p;
        }
    }
    const int kTrials = 500;
    std::map<std::pair<token_id, token_id>, long> counts;
    Session target(*m, target_params());
    SamplingParams dsp = sp;
    dsp.seed = 77;
    Gemma4AssistantDrafter drafter(*a, dsp);
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
    std::printf("gemma4 assistant sampling: chi2 = %.1f, df = %d, critical = %.1f\n", c.stat, c.df,
                c.critical);
    ASSERT_GE(c.df, 5);
    EXPECT_LT(c.stat, c.critical);
}

// The echo assistant drafts the token the target just chose (its logits are a multiple of the
// target's at the position whose hidden state it reads): its first draft equals the history's last
// token only when the proposal reads the right row of the target's last pass. Through the engine
// (the random target's output never repeats, so every draft is refused: row 0 of each
// verification), and by hand after a verification that kept one draft of two (row 1, not the
// pass's last row).
TEST(Gemma4Assistant, DraftsFromTheRowOfTheLastKeptToken) {
    const auto target = Model::load(kTarget);
    Session s(*target, target_params());
    const auto plain = greedy(s, nullptr, 0);
    const auto echo = Gemma4Assistant::load(
        test::kArchDataDir + "/rand-gemma4-assistant-echo-tok512-d128-l2-F16.gguf", *target);
    SamplingParams greedy_sampling;
    greedy_sampling.temp = 0.f;
    Gemma4AssistantDrafter d(*echo, greedy_sampling);
    for (int n_draft : {1, 3}) {
        Recorder r(d);
        SpecStats st;
        EXPECT_EQ(greedy(s, &r, n_draft, &st), plain) << n_draft;
        ASSERT_GT(r.firsts.size(), 5u);
        // The first proposal comes before the target chose anything (the prompt's last token is
        // the one it evaluates next); every later one reads the row of the target's choice.
        for (size_t i = 1; i < r.firsts.size(); ++i)
            EXPECT_EQ(r.firsts[i].second, r.firsts[i].first) << n_draft << " proposal " << i;
    }
    // The prompt, then a verification of [t_L, g_1, x] where g_1 is the target's own next token
    // and x is not: g_1 kept, the target's token after it (row 1) appended, x rolled back.
    const int nv = target->hparams().n_vocab;
    std::vector<token_id> h = {1, 291, 410, 456, 425, 417, 340, 268, 420, 327, 416, 272};
    const int L = int(h.size());
    s.reset();
    s.eval(h);
    h.push_back(token_id(test::argmax(s.logits(L - 1), nv)));
    d.attach(&s);
    d.begin(std::span(h).first(size_t(L)));
    Session g(*target, target_params());
    g.eval(h);
    const token_id g1 = token_id(test::argmax(g.logits(L), nv));
    const token_id x = (g1 + 1) % nv;
    const token_id verify[] = {h.back(), g1, x};
    s.eval(verify);
    const token_id g2 = token_id(test::argmax(s.logits(1), nv));
    ASSERT_NE(g2, token_id(test::argmax(s.logits(2), nv)));  // the last row would draft another
    s.rollback(L + 2);
    d.accept(1);
    h.push_back(g1);
    h.push_back(g2);
    Draft out;
    d.start(h, 2, out);
    ASSERT_EQ(out.size(), 2);
    EXPECT_EQ(out.tokens[0], g2);
    EXPECT_EQ(out.tokens[1], g2);  // chained on its own output: the same hidden state again
}

TEST(Gemma4Assistant, AnAssistantForAnotherTargetIsRefusedNamingTheKeyAndFiles) {
    const auto target = Model::load(kTarget);
    const auto refused = [&](const std::string& path, const std::string& what,
                             const std::string& target_path) {
        const auto t = target_path == kTarget ? nullptr : Model::load(target_path);
        try {
            Gemma4Assistant::load(path, t ? *t : *target);
            ADD_FAILURE() << "no error for " << what;
        } catch (const Error& e) {
            const std::string m = e.what();
            EXPECT_NE(m.find(what), std::string::npos) << m;
            EXPECT_NE(m.find(path), std::string::npos) << m;
            EXPECT_NE(m.find(target_path), std::string::npos) << m;
        }
    };
    const std::string p = "gemma4-assistant.";
    refused(mutated(kAssistant, p + "embedding_length_out", 64),
            "'gemma4-assistant.embedding_length_out' is 64", kTarget);
    refused(mutated(kAssistant, p + "attention.head_count_kv", 4),
            "'gemma4-assistant.attention.head_count_kv' is 4 for layer 0", kTarget);
    refused(mutated(kAssistant, p + "attention.key_length_swa", 64),
            "'gemma4-assistant.attention.key_length_swa' is 64 (layer 0)", kTarget);
    refused(mutated(kAssistant, p + "attention.sliding_window", 32),
            "'gemma4-assistant.attention.sliding_window' is 32", kTarget);
    refused(mutated(kAssistant, "", 0, 256),
            "tensor 'token_embd.weight' has 256 rows, the vocabulary of", kTarget);
    refused(mutated(kMtp, "gemma4_mtp.backbone_embedding_length", 256),
            "'gemma4_mtp.backbone_embedding_length' is 256", kTarget);
    refused(kAssistant, "is 'llama'", test::shared_path("models/tinystories/stories260K.gguf"));
    refused(kTarget, "'general.architecture' is 'gemma4'", kTarget);
}
