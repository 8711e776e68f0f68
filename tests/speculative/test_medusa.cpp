// Medusa heads (speculative/drafters/medusa_head.h, medusa_drafter.h): the draft logits of two
// random-weight head files for stories260K, converted by scripts/models/medusa_convert.py from a
// Hugging Face and a vLLM layout checkpoint (own output matrices / the target's, 1 and 2 blocks),
// against a float64 numpy forward of target and heads (scripts/models/medusa_heads.py,
// tests/data/medusa); greedy speculative output equal to plain decoding; and a head count of 0 or
// 17 or another hidden size refused naming the key and both files.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/session.h"
#include "speculative/drafters/draft_batch.h"
#include "speculative/drafters/medusa_drafter.h"
#include "speculative/generator.h"
#include "speculative/make_drafter.h"
#include "test_util.h"

using namespace specula;
using json = nlohmann::json;

namespace {

const std::string kDir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/medusa/";
const char* kFiles[] = {"stories260K-medusa-hf", "stories260K-medusa-vllm"};

std::string target_path() {
    return test::shared_path("models/tinystories/stories260K.gguf");
}

SessionParams one_thread() {
    SessionParams p;
    p.n_threads = 1;
    return p;
}
const SessionParams kOneThread = one_thread();

// A copy of `src` with one key replaced.
std::string with_key(const std::string& src, const std::string& key, uint32_t v) {
    const auto f = GGUFFile::open(src);
    GGUFWriter w;
    for (const auto& [k, val] : f->metadata()) w.set(k, val);
    w.set_u32(key, v);
    for (const auto& t : f->tensors()) w.add_tensor(t.name, t.ne, t.type, t.data, t.nbytes);
    const std::string path = test::temp_dir("medusa") + "/" + key + std::to_string(v) + ".gguf";
    w.write(path);
    return path;
}

}  // namespace

TEST(Medusa, DraftLogitsMatchTheNumpyForward) {
    auto target = Model::load(target_path());
    for (const char* stem : kFiles) {
        SCOPED_TRACE(stem);
        const json ref = json::parse(test::read_file(kDir + stem + ".json"));
        auto heads = MedusaHeads::load(kDir + stem + ".gguf", *target);
        ASSERT_EQ(heads->heads.size(), ref["logits"].size());
        // The target's final hidden state at the prompt's last token, from the numpy forward.
        const std::vector<float> hidden = ref["hidden"].get<std::vector<float>>();
        ASSERT_EQ(int(hidden.size()), target->hparams().n_embd);
        ThreadPool pool(1);
        MedusaState st;
        std::vector<token_id> draft;
        std::vector<float> logits;
        medusa_draft(*heads, st, hidden.data(), 16, draft, pool, &logits);
        EXPECT_EQ(draft, ref["draft"].get<std::vector<token_id>>());
        const int nv = target->hparams().n_vocab;
        double worst = 0;
        for (size_t h = 0; h < ref["logits"].size(); ++h)
            for (int v = 0; v < nv; ++v)
                worst = std::max(worst, std::abs(double(logits[h * size_t(nv) + size_t(v)]) -
                                                 ref["logits"][h][size_t(v)].get<double>()));
        EXPECT_LT(worst, 2e-3);
    }
}

// On a target with an MTP head (whose sessions keep the final hidden rows anyway).
TEST(Medusa, GreedySpeculativeEqualsPlain) {
    auto target = Model::load(std::string(SPECULA_SOURCE_DIR) +
                              "/tests/data/arch/rand-qwen35-mtp1-tok512-d128-l4-F16.gguf");
    Session s(*target, kOneThread);
    const std::vector<token_id> prompt = {1, 17, 300, 42, 9, 250, 77, 5, 128, 64, 3, 99};
    SamplingParams sp;
    sp.temp = 0.f;
    GenParams gp;
    gp.n_predict = 64;
    gp.ignore_eos = true;
    gp.n_draft = 0;
    Sampler plain_sampler(sp);
    const auto plain = generate_tokens(s, plain_sampler, nullptr, prompt, gp);
    auto heads = MedusaHeads::load(kDir + "rand-qwen35-mtp1-medusa.gguf", *target);
    MedusaDrafter drafter(*heads);
    for (int n_draft : {1, 2, 4}) {  // 4: more than the 2 heads draft
        Sampler sampler(sp);
        gp.n_draft = n_draft;
        SpecStats st;
        EXPECT_EQ(generate_tokens(s, sampler, &drafter, prompt, gp, &st), plain) << n_draft;
        EXPECT_GT(st.n_drafted, 0);
        ASSERT_FALSE(st.pos_reached.empty());
        EXPECT_GT(st.pos_reached[0], 0);
        EXPECT_LE(int(st.pos_reached.size()), 2);
        EXPECT_EQ(st.drafter, "medusa");
    }
}

TEST(Medusa, HeadsForAnotherTargetAreRefusedNamingTheKeyAndFiles) {
    auto target = Model::load(target_path());
    const std::string src = kDir + "stories260K-medusa-vllm.gguf";
    const auto refused = [&](const std::string& path, const std::string& what) {
        try {
            MedusaHeads::load(path, *target);
            ADD_FAILURE() << "no error for " << what;
        } catch (const Error& e) {
            const std::string m = e.what();
            EXPECT_NE(m.find(what), std::string::npos) << m;
            EXPECT_NE(m.find(path), std::string::npos) << m;
            EXPECT_NE(m.find(target->file().path()), std::string::npos) << m;
        }
    };
    refused(with_key(src, "medusa.head_count", 0), "'medusa.head_count' is 0");
    refused(with_key(src, "medusa.head_count", 17), "'medusa.head_count' is 17");
    refused(with_key(src, "medusa.embedding_length", 128), "'medusa.embedding_length' is 128");
    refused(with_key(src, "medusa.vocab_size", 1000), "'medusa.vocab_size' is 1000");
    refused(target_path(), "'general.architecture' is 'llama'");
}

// A target without an MTP head: the setup asks its sessions to keep their final hidden rows
// (SessionParams::keep_hidden), and greedy speculation equals plain decoding.
TEST(Medusa, AnyTargetKeepsItsHiddenRowsForTheHeads) {
    auto target = Model::load(target_path());
    SpeculativeConfig c;
    c.method = SpecMethod::medusa;
    c.draft_model = kDir + "stories260K-medusa-hf.gguf";
    const SpeculativeSetup setup = load_speculative(c, *target);
    ASSERT_TRUE(keeps_hidden(setup));
    SessionParams p = kOneThread;
    p.keep_hidden = keeps_hidden(setup);
    Session s(*target, p);
    const std::vector<token_id> prompt = {1, 403, 407, 260, 378, 297, 365, 261, 271};
    SamplingParams sp;
    sp.temp = 0.f;
    GenParams gp;
    gp.n_predict = 48;
    gp.ignore_eos = true;
    gp.n_draft = 0;
    Sampler plain_sampler(sp);
    const auto plain = generate_tokens(s, plain_sampler, nullptr, prompt, gp);
    MedusaDrafter drafter(*setup.medusa);
    for (int n_draft : {1, 3}) {
        Sampler sampler(sp);
        gp.n_draft = n_draft;
        SpecStats st;
        EXPECT_EQ(generate_tokens(s, sampler, &drafter, prompt, gp, &st), plain) << n_draft;
        EXPECT_GT(st.n_drafted, 0);
    }
}

// A batched step's Medusa drafters (serve's slots) propose together (Drafter::propose_joint,
// medusa_draft_rows: one matmul per head over every slot's hidden row), each with exactly the
// drafts it gets alone, whatever its draft length; a slot with nothing to draft from gets none.
TEST(Medusa, SlotsProposeTogetherWithTheirOwnDrafts) {
    auto target = Model::load(target_path());
    auto heads = MedusaHeads::load(kDir + "stories260K-medusa-hf.gguf", *target);
    ThreadPool pool(2);
    SessionParams p;
    p.pool = &pool;
    p.keep_hidden = true;
    const char* texts[] = {"Once upon a time", "Lily saw a big red", "The little dog ran to the",
                           "Tom"};
    const int n_max[] = {3, 1, 2, 4};
    std::vector<std::unique_ptr<Session>> sessions;
    std::vector<std::unique_ptr<MedusaDrafter>> joint, alone;
    std::vector<std::vector<token_id>> hist;
    for (int i = 0; i < 4; ++i) {
        sessions.push_back(std::make_unique<Session>(*target, p));
        hist.push_back(target->tokenizer().encode(texts[i], true, false));
        if (i < 3) sessions.back()->eval(hist.back(), false);  // slot 3: no pass yet
        for (auto* v : {&joint, &alone}) {
            v->push_back(std::make_unique<MedusaDrafter>(*heads));
            v->back()->attach(sessions.back().get());
            v->back()->begin(hist.back());
        }
    }
    std::vector<Draft> out(4), want(4);
    std::vector<DraftJob> jobs;
    for (int i = 0; i < 4; ++i) {
        jobs.push_back({joint[size_t(i)].get(), hist[size_t(i)], n_max[i], &out[size_t(i)]});
        alone[size_t(i)]->start(hist[size_t(i)], n_max[i], want[size_t(i)]);
    }
    DraftBatch db(&pool);
    db.propose(jobs);
    for (int i = 0; i < 4; ++i) {
        SCOPED_TRACE(texts[i]);
        EXPECT_EQ(out[size_t(i)].tokens, want[size_t(i)].tokens);
        EXPECT_EQ(out[size_t(i)].size(), i < 3 ? std::min(n_max[i], 3) : 0);
        EXPECT_FALSE(out[size_t(i)].has_q);
    }
    // The rows function itself: three hidden rows at once equal each alone (all three heads).
    MedusaState st, st1;
    std::vector<const float*> rows;
    std::vector<std::vector<token_id>> got(3), one(3);
    std::vector<std::vector<token_id>*> outs;
    for (int i = 0; i < 3; ++i) {
        rows.push_back(sessions[size_t(i)]->hidden(0));
        outs.push_back(&got[size_t(i)]);
        medusa_draft(*heads, st1, rows.back(), 16, one[size_t(i)], pool);
    }
    const std::vector<int> ns = {16, 16, 16};
    medusa_draft_rows(*heads, st, rows, ns, outs, pool);
    EXPECT_EQ(got, one);
    EXPECT_NE(one[0], one[1]);  // different rows, different drafts (the check can fail)
}
