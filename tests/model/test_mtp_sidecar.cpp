// The MTP head from a sidecar file (model.h's LoadOptions::mtp_sidecar; `-md` with --spec-type
// mtp): the sidecars of tests/data/arch are the MTP layers of the mtp1 files split off by
// `scripts/models/make_models.py sidecar`, and the files without the head are those files' trunks
// (the same tensors). A trunk with the sidecar computes exactly what the mtp1 file computes (main
// logits and head logits, bit for bit), so its greedy speculative output equals plain greedy and
// the built-in head's run, draft for draft. A sidecar that does not fit is refused naming the key
// and the file, by Model::load and by `specula run` (exit status 1, one error line).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "arch_test_util.h"
#include "cli_process.h"
#include "common/error.h"
#include "gguf/gguf_writer.h"
#include "kernels/layout/fp16.h"
#include "model/load/model.h"
#include "model/session.h"
#include "speculative/config.h"
#include "speculative/drafters/mtp_drafter.h"
#include "speculative/generator.h"
#include "speculative/make_drafter.h"
#include "test_util.h"

namespace {

using namespace specula;

const std::string kDir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";

struct Files {
    std::string with_head, trunk, sidecar;
};
const Files kQwen35{kDir + "rand-qwen35-mtp1-tok512-d128-l4-F16.gguf",
                    kDir + "rand-qwen35-tok512-d128-l4-F16.gguf",
                    kDir + "rand-qwen35-mtp1-tok512-d128-l4-F16.sidecar.gguf"};
const Files kQwen35Moe{kDir + "rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16.gguf",
                       kDir + "rand-qwen35moe-e8x2-tok512-d128-l3-F16.gguf",
                       kDir + "rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16.sidecar.gguf"};

SessionParams params() {
    SessionParams p;
    p.n_ctx = 128;
    p.n_threads = 1;
    return p;
}

std::unique_ptr<Model> load_with(const std::string& model, const std::string& sidecar) {
    return Model::load(model, LoadOptions{.mtp_sidecar = sidecar});
}

// The main pass's logits and the head's over the prompt's positions, one model.
std::vector<float> logits_and_head(const Model& m, const std::vector<token_id>& prompt) {
    Session s(m, params());
    const int L = int(prompt.size()) - 1;
    s.eval(std::span(prompt).first(size_t(L)));
    const size_t d = size_t(m.hparams().n_embd), nv = size_t(m.hparams().n_vocab);
    std::vector<float> out, h;
    for (int p = 0; p < L; ++p) {
        out.insert(out.end(), s.logits(p), s.logits(p) + nv);
        h.insert(h.end(), s.hidden(p), s.hidden(p) + d);
    }
    s.eval_mtp(std::span(prompt).subspan(1), h.data());
    for (int p = 0; p < L; ++p) out.insert(out.end(), s.mtp_logits(p), s.mtp_logits(p) + nv);
    return out;
}

void expect_sidecar_equals_built_in(const Files& f) {
    SCOPED_TRACE(f.sidecar);
    const auto built_in = Model::load(f.with_head);
    const auto trunk = Model::load(f.trunk);
    const auto side = load_with(f.trunk, f.sidecar);
    EXPECT_FALSE(trunk->has_mtp());
    ASSERT_TRUE(side->has_mtp());
    ASSERT_NE(side->mtp_file(), nullptr);
    EXPECT_EQ(side->mtp_path(), f.sidecar);
    EXPECT_EQ(built_in->mtp_path(), f.with_head);
    // Given explicitly, a sidecar replaces a file's own head (here the same weights).
    const auto both = load_with(f.with_head, f.sidecar);
    EXPECT_EQ(both->mtp_path(), f.sidecar);

    const std::vector<token_id> prompt = test::random_tokens(12, 5);
    const std::vector<float> ref = logits_and_head(*built_in, prompt);
    for (const Model* m : {side.get(), both.get()}) {
        const std::vector<float> got = logits_and_head(*m, prompt);
        ASSERT_EQ(got.size(), ref.size());
        EXPECT_EQ(std::memcmp(got.data(), ref.data(), sizeof(float) * ref.size()), 0);
    }

    // Greedy generation: plain on the trunk == speculative with the sidecar's head == with the
    // built-in head, with the same drafts kept.
    GenParams gp;
    gp.n_predict = 40;
    gp.ignore_eos = true;
    SamplingParams greedy;
    greedy.temp = 0.f;
    const auto generate = [&](const Model& m, bool mtp, SpecStats* st) {
        Session target(m, params());
        Sampler sampler(greedy);
        gp.n_draft = mtp ? 3 : 0;
        std::unique_ptr<MtpDrafter> d = mtp ? std::make_unique<MtpDrafter>(m, greedy) : nullptr;
        return generate_tokens(target, sampler, d.get(), prompt, gp, st);
    };
    SpecStats plain_st, side_st, built_in_st;
    const auto plain = generate(*trunk, false, &plain_st);
    ASSERT_EQ(plain.size(), 40u);
    EXPECT_EQ(generate(*side, true, &side_st), plain);
    EXPECT_EQ(generate(*built_in, true, &built_in_st), plain);
    EXPECT_GT(side_st.n_drafted, 0);
    EXPECT_EQ(side_st.n_drafted, built_in_st.n_drafted);
    EXPECT_EQ(side_st.n_accepted, built_in_st.n_accepted);
}

TEST(MtpSidecar, EqualsTheBuiltInHeadQwen35) {
    expect_sidecar_equals_built_in(kQwen35);
}

TEST(MtpSidecar, EqualsTheBuiltInHeadQwen35Moe) {
    expect_sidecar_equals_built_in(kQwen35Moe);
}

// --spec-type mtp -md: the config names the sidecar, and load_speculative accepts the target
// loaded with it (and refuses one loaded without it).
TEST(MtpSidecar, SpeculativeConfig) {
    SpeculativeFlags f;
    f.spec_type = "mtp";
    f.model_draft = kQwen35.sidecar;
    const SpeculativeConfig c = parse_speculative_flags(f);
    EXPECT_EQ(c.method, SpecMethod::mtp);
    EXPECT_EQ(mtp_sidecar(c), kQwen35.sidecar);
    SpeculativeFlags v;
    v.speculative_config = R"({"method": "mtp", "model": ")" + kQwen35.sidecar + R"("})";
    EXPECT_EQ(mtp_sidecar(parse_speculative_flags(v)), kQwen35.sidecar);
    SpeculativeFlags d;
    d.model_draft = kQwen35.sidecar;  // a draft model, not a sidecar
    EXPECT_EQ(mtp_sidecar(parse_speculative_flags(d)), "");

    const auto side = load_with(kQwen35.trunk, kQwen35.sidecar);
    EXPECT_EQ(load_speculative(c, *side).target, side.get());
    const auto own = Model::load(kQwen35.with_head);
    EXPECT_THROW(load_speculative(c, *own), Error);
}

// A copy of `src` at `path`, `edit` applied to its keys, with the tensors `keep` allows.
void write_variant(const std::string& src, const std::string& path,
                   const std::function<void(GGUFWriter&)>& edit,
                   const std::function<bool(const std::string&)>& keep = nullptr) {
    const auto f = GGUFFile::open(src);
    GGUFWriter w;
    for (const auto& [k, v] : f->metadata()) w.set(k, v);
    edit(w);
    for (const GGUFTensor& t : f->tensors())
        if (!keep || keep(t.name)) w.add_tensor(t.name, t.ne, t.type, t.data, t.nbytes);
    w.write(path);
}

void expect_refused(const std::string& target, const std::string& sidecar,
                    const std::string& what) {
    SCOPED_TRACE(what);
    try {
        load_with(target, sidecar);
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(what), std::string::npos) << msg;
        EXPECT_NE(msg.find(sidecar), std::string::npos) << msg;
    }
    // The same through `specula run`: exit status 1, one error line naming the key and the file.
    const test::ProcResult r = test::run_specula(
        {"run", "-m", target, "-p", "hi", "-n", "4", "--spec-type", "mtp", "-md", sidecar});
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(sidecar), std::string::npos) << r.err;
}

TEST(MtpSidecar, BadSidecarsAreRefused) {
    const std::string dir = test::temp_dir("mtp_sidecar");
    const std::string good = kQwen35.sidecar, trunk = kQwen35.trunk;
    const std::string wide = dir + "/wide.gguf", vocab = dir + "/vocab.gguf",
                      index = dir + "/index.gguf", bare = dir + "/bare.gguf";
    write_variant(good, wide, [](GGUFWriter& w) { w.set_u32("qwen35.embedding_length", 256); });
    write_variant(good, vocab, [](GGUFWriter& w) {
        std::vector<std::string> tokens;
        for (int i = 0; i < 500; ++i) tokens.push_back("t" + std::to_string(i));
        w.set_string_array("tokenizer.ggml.tokens", tokens);
    });
    write_variant(good, index, [](GGUFWriter& w) { w.set_u32("qwen35.block_count", 6); });
    write_variant(
        good, bare, [](GGUFWriter&) {},
        [](const std::string& name) { return name.find(".nextn.") == std::string::npos; });
    expect_refused(trunk, wide, "qwen35.embedding_length");
    expect_refused(trunk, vocab, "tokenizer.ggml.tokens");
    expect_refused(trunk, index, "qwen35.block_count");
    expect_refused(trunk, bare, "no blk.N.nextn.* tensors");
    // A model without nextn layers, another architecture's sidecar.
    expect_refused(trunk, trunk, "qwen35.nextn_predict_layers");
    expect_refused(trunk, kQwen35Moe.sidecar, "general.architecture");
    // A whole file with its head fits as a sidecar too (ik_llama.cpp wants an MTP-only one).
    EXPECT_TRUE(load_with(kQwen35Moe.trunk, kQwen35Moe.with_head)->has_mtp());
}

// ik_llama.cpp's output_extra.weight (llama-quantize's extra output for the MTP head): the head
// reads it instead of the output matrix, in the model file or in a sidecar; the main pass keeps
// the output. Here it is the output matrix times 2 (exact in F16), so the head's logits double
// bit for bit and the main logits stay the same.
TEST(MtpSidecar, HeadReadsOutputExtra) {
    const auto f = GGUFFile::open(kQwen35.with_head);
    const GGUFTensor* out = f->find_tensor("output.weight");
    ASSERT_NE(out, nullptr);
    ASSERT_EQ(out->type, GGMLType::F16);
    const size_t n = out->nbytes / 2;
    std::vector<uint16_t> doubled(n);
    const auto* src = static_cast<const uint16_t*>(static_cast<const void*>(out->data));
    for (size_t i = 0; i < n; ++i) doubled[i] = fp32_to_fp16(2.0f * fp16_to_fp32(src[i]));
    const std::string dir = test::temp_dir("mtp_extra");
    const std::string in_file = dir + "/with_extra.gguf", side = dir + "/side_extra.gguf";
    auto add_extra = [&](GGUFWriter& w) {
        w.add_tensor("output_extra.weight", out->ne, GGMLType::F16, doubled.data(), out->nbytes);
    };
    {
        GGUFWriter w;
        for (const auto& [k, v] : f->metadata()) w.set(k, v);
        for (const GGUFTensor& t : f->tensors())
            w.add_tensor(t.name, t.ne, t.type, t.data, t.nbytes);
        add_extra(w);
        w.write(in_file);
        const auto sf = GGUFFile::open(kQwen35.sidecar);
        GGUFWriter ws;
        for (const auto& [k, v] : sf->metadata()) ws.set(k, v);
        for (const GGUFTensor& t : sf->tensors())
            ws.add_tensor(t.name, t.ne, t.type, t.data, t.nbytes);
        add_extra(ws);
        ws.write(side);
    }
    const std::vector<token_id> prompt = test::random_tokens(10, 5);
    const auto base = Model::load(kQwen35.with_head);
    const std::vector<float> ref = logits_and_head(*base, prompt);
    for (const auto& m : {Model::load(in_file), load_with(kQwen35.trunk, side)}) {
        const std::vector<float> got = logits_and_head(*m, prompt);
        ASSERT_EQ(got.size(), ref.size());
        const size_t main = ref.size() / 2;  // the main pass's rows, then the head's
        for (size_t i = 0; i < main; ++i) ASSERT_EQ(got[i], ref[i]) << i;
        for (size_t i = main; i < ref.size(); ++i) ASSERT_EQ(got[i], 2.0f * ref[i]) << i;
    }
}

}  // namespace
