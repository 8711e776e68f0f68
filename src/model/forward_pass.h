// Internal to model/: the forward pass over one or more sequences (forward.cpp), the blocks an
// architecture's layer is made of (model/arch.h), and the state of a Session (its KV cache, its
// logits, the pool it runs on). Session::eval runs a pass over one sequence; BatchEvaluator
// (model/batch_eval.h) runs one pass over rows of several, each row reading and writing only its
// own sequence's cache, so a row's logits do not depend on what else shares the pass.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "common/threadpool.h"
#include "kernels/matmul.h"
#include "model/attention.h"
#include "model/kv_cache.h"
#include "model/moe.h"
#include "model/offload.h"
#include "model/recurrent_state.h"
#include "model/rope.h"
#include "model/session.h"

namespace specula {

struct Session::Impl {
    Impl(const Model& m, const SessionParams& p);
    ~Impl();

    const Model& model;
    std::unique_ptr<ThreadPool> own_pool;  // null when built over SessionParams::pool
    ThreadPool* pool;
    KVCache kv;
    RecurrentState rec;  // hybrid models' recurrent layers (empty otherwise)
    // Made on the first Session::eval, or SessionParams::shared_pass.
    std::shared_ptr<ForwardPass> pass;
    std::unique_ptr<LayerOffload> offload;  // layers [0, offload->n_layers()) on a device
    std::vector<float> logits;              // n_logits rows of n_vocab
    int n_logits = 0;
    // The MTP head (Model::has_mtp): its KV cache (one layer), the main pass's final hidden rows
    // (one per logits row), the head's last pass: logits and output hidden rows.
    std::unique_ptr<KVCache> mtp_kv;
    std::vector<float> hidden, mtp_logits, mtp_hidden;
    int n_mtp = 0;
    int n_ubatch;  // SessionParams::n_ubatch
    // The most tokens one pass of this session takes (n_ubatch, a ring cache's max_pass).
    int max_pass() const;

    // Throws Error (context overflow, token id out of range) before anything changes.
    void check(std::span<const token_id> tokens) const;
    // The same for an MTP head pass (and an Error naming the file when there is no head).
    void check_mtp(std::span<const token_id> next) const;
};

// One sequence's share of a pass: its tokens go to positions n_past() .. of its own cache.
struct PassSegment {
    Session::Impl* seq = nullptr;
    std::span<const token_id> tokens;
    bool all_logits = true;  // false: only the last token's logits
    int logits_row = 0;      // the first row of the session's logits this pass writes
};

// One session's share of an MTP head pass (ForwardPass::run_mtp): MTP positions mtp_n_past() ..
// of its head cache take [next[i], hidden row i].
struct MtpSegment {
    Session::Impl* seq = nullptr;
    std::span<const token_id> next;
    const float* hidden = nullptr;  // next.size() rows of n_embd
};

// The buffers of a pass (they grow to the largest pass seen and are reused), the pass itself, and
// the blocks of a layer. The hidden state x holds one row per token of the pass; a layer's block
// (ArchSpec::block) calls the steps below in order for the current layer.
class ForwardPass {
  public:
    explicit ForwardPass(const Model& model);

    // Evaluates every segment's tokens in ONE pass over the weights (each matmul takes all rows),
    // appends them to their caches, and leaves each segment's logits in its Session. The
    // segments must be checked already and belong to distinct sessions of this model.
    void run(std::span<const PassSegment> segs, ThreadPool& pool);

    const HParams& hparams() const { return hp_; }
    const Model& model() const { return model_; }

    // What the buffers of a pass of ntok rows (logit_rows of them through the pass's own logits
    // buffer: a pass over several sequences) take, in bytes (the memory plan's figure), and what
    // this pass holds now (they grow to the largest pass seen; tests hold the two together).
    double buffer_bytes(int ntok, int logit_rows);
    double allocated_bytes() const;

    // The MTP head (ModelWeights::mtp) over every segment in ONE pass (each row attends over its
    // own session's head cache): see Session::eval_mtp. Checked already; distinct sessions. Every
    // input row is read before any output is written (a hidden input may be a session's own
    // mtp_hidden).
    void run_mtp(std::span<const MtpSegment> segs, ThreadPool& pool);

    // --- The blocks (model/arch/*.cpp call them from ArchSpec::block) ---
    // h = rms_norm(x) * attn_norm; q, k, v = Wq h, Wk h, Wv h (+ the biases l has).
    void attention_input(const LayerWeights& l);
    // qwen35's gated attention input: Wq's rows hold each head's q then its output gate; q and
    // the gate are split apart (the gate applies in attention_output: out *= sigmoid(gate)).
    void gated_attention_input(const LayerWeights& l);
    // A whole Gated DeltaNet layer (qwen35, model/delta_net.h) over every segment's recurrent
    // state: h = rms_norm(x) * attn_norm; [q|k|v] = conv(W_qkv h), z = W_gate h, beta and alpha;
    // the gated delta rule; x += ssm_out(rms_norm(o) * ssm_norm * silu(z)). In the last layer
    // only the output rows go on (as attention_output).
    void delta_net(const LayerWeights& l);
    // The same from one fused matrix (l.wqkv, phi3): one matmul, its rows split into q, k, v.
    void attention_input_fused(const LayerWeights& l);
    // q and k of every row: each head's head_dim values = rms_norm(head) * q_norm / k_norm (qwen3;
    // between attention_input and rope_and_cache).
    void qk_norm(const LayerWeights& l);
    // Rotates q and k at each row's position (with the sliding-window rope in a sliding-window
    // layer) and writes k, v into each segment's cache.
    void rope_and_cache();
    // q *= s (phi3 scales q by 1/sqrt(head_dim) after the rope, and its softmax by 1).
    void scale_q(float s);
    // mistral3's attention temperature: q of a row at position p *= 1 + hp.attn_temp_scale *
    // log(floor((p + 1) / hp.attn_temp_floor) + 1) (after rope_and_cache).
    void temper_q();
    // x += Wo attention(q, K, V) (+ bo), within the layer's window (HParams::window), the
    // output RMS-normed by attn_post_norm first when l has one. In the last layer only each
    // segment's output rows
    // (moved to the front of x) go on from here.
    void attention_output(const LayerWeights& l);
    // x += FFN(rms_norm(x) * ffn_norm): the MoE when the model has experts (plus the shared
    // expert l has one: qwen35moe), else SwiGLU (GeGLU with HParams::FfnAct::GeluTanh); the FFN
    // output RMS-normed by ffn_post_norm first when l has one.
    void ffn(const LayerWeights& l);
    // x += down(silu(g) * u) with [g | u] = l.ffn_gate_up (rms_norm(x) * ffn_norm): one matmul
    // for both halves (phi3).
    void ffn_fused(const LayerWeights& l);

  private:
    // Sizes the buffers for a pass of ntok rows, logit_rows of them copied through logits_.
    void reserve(int ntok, int logit_rows, int max_ctx, int n_threads);
    // f(buffer, floats) for each buffer reserve sizes by the pass's rows (not scores_, which the
    // memory plan counts with the KV cache): the one list reserve and buffer_bytes read.
    template <class F>
    void each_buffer(int ntok, int logit_rows, F&& f);
    // The cache segment s's attention reads and writes: its MTP cache in run_mtp.
    KVCache& kv_of(size_t s) const { return mtp_ ? *segs_[s].seq->mtp_kv : segs_[s].seq->kv; }
    int kv_layer() const { return mtp_ ? 0 : il_; }
    bool mtp_ = false;
    std::vector<float> mtp_cat_;
    std::vector<PassSegment> pass_segs_;  // run_mtp's segments as the blocks see them
    void norm_rows(const float* in, const float* w, int ntok, float* out);
    // The rope frequency factors of a session with an n_ctx context (or nullptr).
    const float* rope_factors(int n_ctx) const;

    const Model& model_;
    const HParams hp_;
    MatmulScratch mm_;
    MoeFFN moe_;
    RopeParams rope_;
    RopeParams rope_swa_;    // sliding-window layers' (HParams::rope_freq_*_swa)
    bool swa_rope_ = false;  // some layer is a sliding-window one: rope_cs_swa_ is filled
    AttentionShape att_shape_;
    // The pass being run: its segments, its pool, the layer and the rows it carries on.
    std::span<const PassSegment> segs_;
    ThreadPool* pool_ = nullptr;
    int il_ = 0;
    bool last_ = false;  // the last layer: only output rows after the attention
    int rows_ = 0;       // rows x carries into the FFN (all, or the output rows in the last layer)
    // Per segment: first row, rows, first output row, output rows (the last n_out of its rows).
    std::vector<int> off_, n_, out_off_, n_out_;
    int n_rows_ = 0, n_out_rows_ = 0;
    std::vector<float> x_, h_, q_, k_new_, v_new_, att_, tmp_, ff_g_, ff_u_, rope_cs_, rope_cs_swa_,
        logits_, scores_, qkv_;
    // qwen35: the gated Q rows and the gate (gate_on_: attention_output applies it); the DeltaNet
    // layer's inputs (x, z, beta, alpha, g), outputs and conv scratch; the shared expert's.
    std::vector<float> qg_, gate_, dn_x_, dn_z_, dn_b_, dn_a_, dn_g_, dn_o_, dn_scratch_, sh_g_,
        sh_u_, sh_d_;
    bool gate_on_ = false;
    DeltaNetShape dn_shape_;
    void shared_expert(const LayerWeights& l, int nrows);
    int64_t qkv_width_ = 0;  // rows of the fused wqkv (0: none)
    int64_t ff_width_ = 0;   // per-row floats of ff_g_: n_ff, or 2 n_ff for a fused gate/up
};

}  // namespace specula
