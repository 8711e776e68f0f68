// What drafters take from a pass (model/load/arch.h's hooks, model/session.h): the hidden states at
// named layers (SessionParams::capture_layers, Session::captured) checked against a model cut to
// those layers, batch invariance and bad layer lists; read access to the KV cache; the
// architectures' hook tables (MTP head layer, KV source layer, capture layers).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "arch_test_util.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "kernels/ops.h"
#include "model/batch_eval.h"
#include "model/load/arch.h"
#include "model/session.h"
#include "test_util.h"

namespace {

using namespace specula;
using namespace specula::test;

const std::string kF32 = "models/synthetic/rand-llama-tok512-d256-l2-F32.gguf";
const std::vector<token_id> kTokens = {1, 17, 300, 42, 9, 250, 77, 5, 128, 64, 3};

// `src` (a llama file) cut to its first n layers: block_count n, the later blk.* dropped.
std::string cut_layers(const std::string& src_path, int n) {
    const auto src = GGUFFile::open(src_path);
    GGUFWriter w;
    for (const auto& [k, v] : src->metadata()) w.set(k, v);
    w.set_u32("llama.block_count", uint32_t(n));
    for (const auto& t : src->tensors()) {
        if (t.name.rfind("blk.", 0) == 0 && std::stoi(t.name.substr(4)) >= n) continue;
        w.add_tensor(t.name, t.ne, t.type, t.data, t.nbytes);
    }
    const std::string path = temp_dir("hooks") + "/cut" + std::to_string(n) + ".gguf";
    w.write(path);
    return path;
}

SessionParams capturing(std::vector<int> layers) {
    SessionParams p;
    p.n_threads = 1;
    p.capture_layers = std::move(layers);
    return p;
}

// Layer il's output is the residual stream a model of il + 1 layers ends with: its logits are
// output(rms_norm(captured) * output_norm), computed here by hand from the F32 weights.
TEST(PassHooks, CapturedLayerIsTheCutModelsLastHiddenState) {
    const std::string path = shared_path(kF32);
    const auto fullp = Model::load(path);
    const auto cutp = Model::load(cut_layers(path, 1));
    const Model& full = *fullp;
    const Model& cut = *cutp;
    Session a(full, capturing({0}));
    a.eval(kTokens);
    ASSERT_EQ(a.n_captured(), int(kTokens.size()));
    ASSERT_EQ(a.capture_width(), full.hparams().n_embd);
    Session b(cut, capturing({}));
    b.eval(kTokens);
    const auto file = GGUFFile::open(path);
    const GGUFTensor& out = file->tensor("output.weight");
    const GGUFTensor& norm = file->tensor("output_norm.weight");
    ASSERT_EQ(out.type, GGMLType::F32);
    const int d = full.hparams().n_embd, nv = full.hparams().n_vocab;
    const float* W = reinterpret_cast<const float*>(out.data);
    std::vector<float> h(d);
    for (size_t t = 0; t < kTokens.size(); ++t) {
        rms_norm(a.captured(int(t)), reinterpret_cast<const float*>(norm.data), d,
                 full.hparams().rms_eps, h.data());
        double max_err = 0, max_ref = 0;
        for (int v = 0; v < nv; ++v) {
            double dot = 0;
            for (int i = 0; i < d; ++i) dot += double(W[size_t(v) * d + i]) * h[i];
            max_err = std::max(max_err, std::abs(dot - b.logits(int(t))[v]));
            max_ref = std::max(max_ref, std::abs(dot));
        }
        EXPECT_LT(max_err, 1e-4 * std::max(1.0, max_ref)) << "token " << t;
    }
}

// Captured rows are the same whether the tokens run in one pass, one at a time, or in a batch
// with another session; capturing changes no logit.
TEST(PassHooks, CapturedRowsAreBatchInvariant) {
    const auto mp = Model::load(shared_path("models/tinystories/stories260K.gguf"));
    const Model& m = *mp;
    const int n_layer = m.hparams().n_layer;
    ASSERT_GE(n_layer, 3);
    const std::vector<int> layers = {n_layer - 2, 0};  // unsorted: kept ascending
    Session whole(m, capturing(layers));
    whole.eval(kTokens);
    ASSERT_EQ(whole.capture_width(), 2 * m.hparams().n_embd);
    Session plain(m, capturing({}));
    plain.eval(kTokens);
    const size_t w = size_t(whole.capture_width());
    const size_t nv = size_t(m.hparams().n_vocab);
    for (size_t t = 0; t < kTokens.size(); ++t) {
        EXPECT_EQ(0, std::memcmp(whole.logits(int(t)), plain.logits(int(t)), nv * sizeof(float)));
    }
    Session steps(m, capturing(layers));
    for (size_t t = 0; t < kTokens.size(); ++t) {
        steps.eval(std::span(&kTokens[t], 1));
        ASSERT_EQ(steps.n_captured(), 1);
        EXPECT_EQ(0, std::memcmp(steps.captured(0), whole.captured(int(t)), w * sizeof(float)))
            << "token " << t;
    }
    // The two layers' columns differ (the column order is ascending: layer 0 first).
    EXPECT_NE(0, std::memcmp(whole.captured(3), whole.captured(3) + w / 2, w / 2 * sizeof(float)));
    ThreadPool pool(1);
    SessionParams p = capturing(layers);
    p.pool = &pool;
    Session x(m, p), y(m, p);
    x.eval(std::span(kTokens).first(4));
    const std::vector<token_id> other = {7, 8, 9};
    BatchEvaluator be(m, pool);
    const BatchItem items[] = {{&x, std::span(kTokens).subspan(4), true}, {&y, other, true}};
    be.eval(items);
    ASSERT_EQ(x.n_captured(), int(kTokens.size()) - 4);
    for (int t = 0; t < x.n_captured(); ++t) {
        EXPECT_EQ(0, std::memcmp(x.captured(t), whole.captured(4 + t), w * sizeof(float)));
    }
}

TEST(PassHooks, BadCaptureListsAreRefused) {
    const auto mp = Model::load(shared_path(kF32));  // 2 layers
    const Model& m = *mp;
    for (const std::vector<int>& bad : {std::vector<int>{1}, {-1}, {0, 0}}) {
        EXPECT_THROW(Session(m, capturing(bad)), Error);
    }
    Session s(m, capturing({}));
    s.eval(kTokens);
    EXPECT_THROW(s.captured(0), Error);
    Session c(m, capturing({0}));
    c.eval(kTokens);
    EXPECT_THROW(c.captured(int(kTokens.size())), Error);
}

// Every architecture's capture layers (its hook or EAGLE-3's default) are ones a session of a
// real model accepts and fills.
TEST(PassHooks, ArchitectureCaptureLayersAreAccepted) {
    const auto mp = Model::load(shared_path("models/tinystories/stories260K.gguf"));
    const Model& m = *mp;
    const std::vector<int> layers = capture_layers_for(m.arch(), m.hparams());
    ASSERT_FALSE(layers.empty());
    Session s(m, capturing(layers));
    s.eval(kTokens);
    EXPECT_EQ(s.n_captured(), int(kTokens.size()));
    EXPECT_EQ(s.capture_width(), int(layers.size()) * m.hparams().n_embd);
    EXPECT_EQ(kv_source_layer_for(m.arch(), m.hparams(), /*swa=*/false), m.hparams().n_layer - 1);
}

// Session::kv reads the rows the pass wrote: the same keys as a session evaluated step by step.
TEST(PassHooks, KvIsReadable) {
    const auto mp = Model::load(shared_path(kF32));
    const Model& m = *mp;
    Session a(m, capturing({})), b(m, capturing({}));
    a.eval(kTokens);
    for (token_id t : kTokens) b.eval(std::span(&t, 1));
    ASSERT_EQ(a.kv().n_past(), int(kTokens.size()));
    const int dkv = m.hparams().n_embd_kv();
    std::vector<float> ka(dkv), kb(dkv), va(dkv), vb(dkv);
    for (int layer = 0; layer < m.hparams().n_layer; ++layer) {
        for (int pos = 0; pos < a.kv().n_past(); ++pos) {
            a.kv().read_k(layer, pos, 0, dkv, ka.data());
            b.kv().read_k(layer, pos, 0, dkv, kb.data());
            a.kv().read_v(layer, pos, 0, dkv, va.data());
            b.kv().read_v(layer, pos, 0, dkv, vb.data());
            EXPECT_EQ(ka, kb);
            EXPECT_EQ(va, vb);
        }
    }
}

TEST(PassHooks, ArchitectureHookTables) {
    for (const ArchSpec* a : archs()) {
        EXPECT_EQ(a->bind_mtp != nullptr, a->mtp_block != nullptr) << a->name;
        EXPECT_NE(a->block, nullptr) << a->name;
    }
    HParams hp;
    hp.n_layer = 12;
    EXPECT_EQ(default_capture_layers(hp), (std::vector<int>{2, 6, 9}));
    hp.n_layer = 3;
    EXPECT_EQ(default_capture_layers(hp), (std::vector<int>{1}));
    // gemma3's pattern: every sixth layer global, the rest sliding-window.
    hp.n_layer = 12;
    hp.n_swa = 512;
    hp.swa_layers.assign(12, 0);
    for (int il = 0; il < 12; ++il) hp.swa_layers[size_t(il)] = (il + 1) % 6 != 0;
    EXPECT_EQ(default_kv_source_layer(hp, /*swa=*/false), 11);
    EXPECT_EQ(default_kv_source_layer(hp, /*swa=*/true), 10);
    hp.swa_layers.assign(12, 1);
    EXPECT_EQ(default_kv_source_layer(hp, /*swa=*/false), -1);
}

}  // namespace
