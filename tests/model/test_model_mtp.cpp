// The MTP (nextn) head of a qwen35 file (model/load/weights.h's MtpWeights, Session::eval_mtp): the
// file with one MTP layer loads it beside the same 4 main layers, whose logits stay bit-identical
// to the file without it; the head's logits at its first position equal a slow recomputation from
// the formula (at one position the attention is the value row itself, so rope and the q/k norms
// drop out: x = eh_proj [enorm(e) | hnorm(h)], x += Wo (v * sigmoid(gate)), logits = output
// (rms_norm(x) * shared_head_norm)); the head's cache makes one pass over several rows equal to
// row-by-row passes and rolls back; a model without the head refuses with an Error naming the file.
// ik_llama.cpp's public API gives no direct access to MTP logits (its MTP graph runs through
// common/speculative's internal state), so the slow recomputation is the reference here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "arch_test_util.h"
#include "common/error.h"
#include "kernels/quants.h"
#include "model/load/model.h"
#include "model/session.h"
#include "test_util.h"

namespace {

using namespace specula::test;

using specula::Model;
using specula::Session;
using specula::SessionParams;
using specula::token_id;
using specula::WeightView;

const std::string kDir = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";
const std::string kDense = kDir + "rand-qwen35-tok512-d128-l4-F16.gguf";
const std::string kMtp = kDir + "rand-qwen35-mtp1-tok512-d128-l4-F16.gguf";
// qwen35moe: the head has its own MoE FFN (routed experts and the shared one).
const std::string kMoe = kDir + "rand-qwen35moe-e8x2-tok512-d128-l3-F16.gguf";
const std::string kMoeMtp = kDir + "rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16.gguf";

template <class F>
void expect_error_contains(F f, const std::vector<std::string>& needles) {
    try {
        f();
        ADD_FAILURE() << "no error";
    } catch (const specula::Error& e) {
        const std::string msg = e.what();
        for (const auto& n : needles)
            EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
    }
}

SessionParams params() {
    SessionParams p;
    p.n_ctx = 256;
    p.n_threads = 2;
    return p;
}

// y = W x (W: rows x cols, any stored type), in double.
std::vector<double> matvec(const WeightView& w, const std::vector<double>& x) {
    std::vector<float> r(size_t(w.cols));
    std::vector<double> y(size_t(w.rows), 0.0);
    for (int64_t i = 0; i < w.rows; ++i) {
        specula::dequantize_row(w.type, w.row(i), r.data(), w.cols);
        double acc = 0;
        for (int64_t j = 0; j < w.cols; ++j) acc += double(r[size_t(j)]) * x[size_t(j)];
        y[size_t(i)] = acc;
    }
    return y;
}

std::vector<double> rms_norm(const std::vector<double>& x, const float* w, double eps) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double s = 1.0 / std::sqrt(ss / double(x.size()) + eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * s * w[i];
    return y;
}

// The head's logits at MTP position 0 (an empty cache) for token `next` and hidden state h.
std::vector<double> slow_mtp(const Model& m, token_id next, const float* h) {
    const auto& hp = m.hparams();
    const auto& mt = m.mtp;
    const size_t d = size_t(hp.n_embd);
    std::vector<float> e(d);
    specula::dequantize_row(m.tok_embd.type, m.tok_embd.row(next), e.data(), int64_t(d));
    const auto en = rms_norm(std::vector<double>(e.begin(), e.end()), mt.enorm, hp.rms_eps);
    const auto hn = rms_norm(std::vector<double>(h, h + d), mt.hnorm, hp.rms_eps);
    std::vector<double> cat(en);  // the token's embedding first, then the hidden state
    cat.insert(cat.end(), hn.begin(), hn.end());
    std::vector<double> x = matvec(mt.eh_proj, cat);
    const auto a = rms_norm(x, mt.layer.attn_norm, hp.rms_eps);
    const auto qg = matvec(mt.layer.wq, a);  // per head: q then its gate
    const auto v = matvec(mt.layer.wv, a);
    const int hd = hp.head_dim, group = hp.n_head / hp.n_head_kv;
    std::vector<double> att(size_t(hp.n_head * hd));
    for (int h2 = 0; h2 < hp.n_head; ++h2) {
        for (int i = 0; i < hd; ++i) {
            const double g = qg[size_t(h2 * 2 * hd + hd + i)];
            att[size_t(h2 * hd + i)] = v[size_t((h2 / group) * hd + i)] / (1.0 + std::exp(-g));
        }
    }
    const auto o = matvec(mt.layer.wo, att);
    for (size_t i = 0; i < d; ++i) x[i] += o[i];
    EXPECT_EQ(mt.layer.ffn_gate.data, nullptr);  // the test file's head has no FFN
    return matvec(m.output, rms_norm(x, mt.shared_head_norm, hp.rms_eps));
}

void expect_head_beside_the_same_layers(const std::string& mtp_file, const std::string& dense_file,
                                        int n_main) {
    SCOPED_TRACE(mtp_file);
    const auto with = Model::load(mtp_file);
    const auto without = Model::load(dense_file);
    EXPECT_TRUE(with->has_mtp());
    EXPECT_FALSE(without->has_mtp());
    EXPECT_EQ(with->hparams().n_layer, n_main);
    EXPECT_EQ(with->hparams().n_nextn, 1);
    EXPECT_NE(with->mtp.shared_head_norm, nullptr);
    EXPECT_NE(with->mtp.layer.q_norm, nullptr);
    const auto toks = random_tokens(12, 3);
    Session a(*with, params()), b(*without, params());
    a.eval(toks);
    b.eval(toks);
    const int nv = with->hparams().n_vocab;
    for (int i = 0; i < 12; ++i)
        ASSERT_TRUE(std::equal(a.logits(i), a.logits(i) + nv, b.logits(i))) << "row " << i;
}

TEST(Mtp, LoadsTheHeadBesideTheSameMainLayers) {
    expect_head_beside_the_same_layers(kMtp, kDense, 4);
    expect_head_beside_the_same_layers(kMoeMtp, kMoe, 3);
    const auto moe = Model::load(kMoeMtp);
    EXPECT_NE(moe->mtp.layer.ffn_gate_exps.data, nullptr);  // the head's own experts
}

TEST(Mtp, FirstPositionMatchesTheFormula) {
    const auto m = Model::load(kMtp, specula::LoadOptions{.n_threads = 2, .repack = false});
    Session s(*m, params());
    const auto toks = random_tokens(6, 11);
    s.eval(toks);
    const int nv = m->hparams().n_vocab;
    for (int row : {0, 5}) {
        s.mtp_rollback(0);
        const token_id next = token_id((toks[size_t(row)] * 7 + 3) % nv);
        s.eval_mtp(std::span(&next, 1), s.hidden(row));
        const auto ref = slow_mtp(*m, next, s.hidden(row));
        double scale = 0, worst = 0;
        for (int i = 0; i < nv; ++i) scale = std::max(scale, std::abs(ref[size_t(i)]));
        for (int i = 0; i < nv; ++i)
            worst = std::max(worst, std::abs(double(s.mtp_logits(0)[i]) - ref[size_t(i)]));
        EXPECT_GT(scale, 1.0);
        EXPECT_LT(worst, 2e-3 * scale) << "row " << row;
        EXPECT_EQ(s.mtp_n_past(), 1);
    }
}

void expect_one_pass_equals_row_by_row(const std::string& file) {
    SCOPED_TRACE(file);
    const auto m = Model::load(file);
    Session s(*m, params());
    const auto toks = random_tokens(9, 5);
    s.eval(toks);
    const size_t d = size_t(m->hparams().n_embd);
    const int nv = m->hparams().n_vocab;
    std::vector<float> h;
    for (int i = 0; i < 8; ++i) h.insert(h.end(), s.hidden(i), s.hidden(i) + d);
    // MTP position p takes [t_{p+1}, h_p].
    const std::span<const token_id> next(toks.data() + 1, 8);
    s.eval_mtp(next, h.data());
    ASSERT_EQ(s.mtp_n_past(), 8);
    std::vector<float> all(s.mtp_logits(0), s.mtp_logits(0) + size_t(8) * nv);
    std::vector<float> last_hidden(s.mtp_hidden(7), s.mtp_hidden(7) + d);
    s.mtp_rollback(0);
    for (int p = 0; p < 8; ++p) {
        s.eval_mtp(next.subspan(size_t(p), 1), h.data() + d * p);
        for (int i = 0; i < nv; ++i)
            ASSERT_NEAR(s.mtp_logits(0)[i], all[size_t(p) * nv + i], 1e-4) << p << " " << i;
    }
    for (size_t i = 0; i < d; ++i) ASSERT_NEAR(s.mtp_hidden(0)[i], last_hidden[i], 1e-4);
    // Rolling back to 5 and redoing 5..7 gives the same rows again.
    s.mtp_rollback(5);
    s.eval_mtp(next.subspan(5, 3), h.data() + d * 5);
    for (int i = 0; i < nv; ++i) ASSERT_NEAR(s.mtp_logits(2)[i], all[size_t(7) * nv + i], 1e-4);
}

TEST(Mtp, OnePassEqualsRowByRowAndRollsBack) {
    expect_one_pass_equals_row_by_row(kMtp);
    expect_one_pass_equals_row_by_row(kMoeMtp);  // the head's MoE FFN too
}

TEST(Mtp, ModelWithoutTheHeadIsAnError) {
    const auto m = Model::load(kDense);
    Session s(*m, params());
    const auto toks = random_tokens(3, 1);
    s.eval(toks);
    expect_error_contains([&] { s.hidden(0); },
                          {"rand-qwen35-tok512-d128-l4-F16.gguf", "keep_hidden"});
    expect_error_contains([&] { s.eval_mtp(toks, nullptr); }, {"no MTP head"});
}

// SessionParams::keep_hidden: a model without a head keeps each logits row's final hidden state
// (for Medusa), the same rows whatever the pass, and the logits do not change.
TEST(Mtp, KeepHiddenWithoutAHead) {
    const auto m = Model::load(kDense);
    specula::SessionParams p = params();
    Session plain(*m, p);
    p.keep_hidden = true;
    Session kept(*m, p), one(*m, p);
    const auto toks = random_tokens(6, 2);
    plain.eval(toks);
    kept.eval(toks);
    const int d = m->hparams().n_embd, nv = m->hparams().n_vocab;
    for (int i = 0; i < 6; ++i) {
        ASSERT_EQ(std::memcmp(plain.logits(i), kept.logits(i), sizeof(float) * nv), 0) << i;
        one.eval(std::span(&toks[size_t(i)], 1));
        ASSERT_EQ(std::memcmp(one.hidden(0), kept.hidden(i), sizeof(float) * d), 0) << i;
        // The output norm's output: the logits are output . hidden (a nonzero row).
        float sum = 0;
        for (int j = 0; j < d; ++j) sum += std::fabs(kept.hidden(i)[j]);
        EXPECT_GT(sum, 0.f);
    }
}

}  // namespace
