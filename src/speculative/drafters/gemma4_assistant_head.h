// Gemma4Assistant: Gemma 4's assistant drafter (ik_llama.cpp's `gemma4-assistant` and
// `gemma4_mtp` GGUF files) bound to the gemma4 target it drafts for, and its forward step.
//
// The file: the usual per-layer keys under its architecture (embedding_length: its own width d,
// block_count, feed_forward_length, attention.head_count, head_count_kv (one per layer: the KV
// heads of the target layer it reads), key_length / key_length_swa, attention.sliding_window and
// sliding_window_pattern, layer_norm_rms_epsilon) and the target's hidden size D
// (`gemma4-assistant.embedding_length_out`, or `gemma4_mtp.backbone_embedding_length`). Tensors:
// token_embd [d x n_vocab] (the tied output; output.weight or output_extra.weight win),
// output_norm, the input projection [2 D -> d] (nextn.pre_projection / mtp_pre_proj) and the output
// projection [d -> D] (nextn.post_projection / mtp_post_proj), rope_freqs (optional: the full
// layers' frequency factors), per layer attn_norm, attn_q, attn_q_norm, attn_output,
// post_attention_norm, ffn_norm, ffn_gate / up / down, post_ffw_norm, layer_output_scale
// (optional). The centroid tensors ik_llama.cpp keeps for later are not read (its graph does not
// use them either).
//
// One step, for the token t the target evaluates next at position L (the target's cache holds
// positions 0 .. L - 1) and a hidden state h of D floats (the target's final hidden state after
// its output norm at position L - 1, or the assistant's own output of the step before):
//   x = pre_proj [embed_target(t) * sqrt(D) | h]
//   per layer: q = per-head rms_norm(Wq rms_norm(x) * attn_norm) * attn_q_norm, rotated at L as
//              the target rotates its keys there (its layer kind's rope; the full layers with the
//              assistant's rope_freqs); attention over the target's cache of the last target layer
//              of the same kind with a cache of its own (ArchSpec::kv_source_layer), rows L - w + 1
//              .. L - 1 for a window w, else 0 .. L - 1, scale 1;
//              x += rms_norm(Wo att) * post_attention_norm;
//              x += rms_norm(down(gelu(gate h) * up h)) * post_ffw_norm, h = rms_norm(x) *
//              ffn_norm; x *= layer_output_scale
//   y = rms_norm(x) * output_norm; logits = output y (no soft-cap); the next step's h = post_proj
//   y.
// Chained steps keep the position L (ik_llama.cpp holds the assistant's positions constant): the
// assistant has no cache of its own.
//
// Load refuses, naming the key or tensor and both files, an assistant that does not fit the
// target: a target that is not gemma4, another hidden size, a vocabulary of another size, a
// layer whose target cache layer is missing or has other KV heads or another head size, a window
// wider than the target's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/threadpool.h"
#include "model/blocks/attention.h"
#include "model/blocks/rope.h"
#include "model/load/model.h"
#include "model/state/kv_cache.h"

namespace specula {

struct Gemma4AssistantLayer {
    const float *attn_norm = nullptr, *q_norm = nullptr, *attn_post_norm = nullptr;
    const float *ffn_norm = nullptr, *ffn_post_norm = nullptr, *out_scale = nullptr;
    WeightView wq, wo, ffn_gate, ffn_up, ffn_down;
    int kv_layer = 0;    // the target's cache layer it attends over
    AttentionShape att;  // the window as attention() takes it for a query at L - 1 (see .cpp)
    RopeParams rope;
};

struct Gemma4Assistant {
    // Throws Error naming the key / tensor, `path` and the target's file when they do not fit.
    static std::unique_ptr<Gemma4Assistant> load(const std::string& path, const Model& target);
    // Whether the GGUF at `path` is an assistant (general.architecture gemma4-assistant or
    // gemma4_mtp): `--spec-type mtp -md FILE` drafts with it. False for a file that cannot be
    // read (its loader names the problem).
    static bool is_assistant_file(const std::string& path);

    std::unique_ptr<GGUFFile> file;
    const Model* target = nullptr;
    HParams hp;          // its own (hp.arch: the file's architecture)
    int n_backbone = 0;  // D, the target's hidden size
    WeightView pre_proj, post_proj, output;
    const float* output_norm = nullptr;
    std::vector<Gemma4AssistantLayer> layers;
    ModelWeights owned;  // F32 copies of vectors stored in other types

    int n_vocab() const { return int(output.rows); }
};

// One step's buffers (they only grow).
struct Gemma4AssistantState {
    MatmulScratch mm;
    std::vector<float> in, x, h, q, att, tmp, ff_g, ff_u, cs, scores;
    std::vector<float> logits;  // the last step's, n_vocab
    std::vector<float> hidden;  // the last step's projected output (D floats): the next h
};

// One step (above): token t at position pos over the target's cache `kv` (rows 0 .. pos - 1
// valid), hidden h (D floats). Fills st.logits and st.hidden.
void gemma4_assistant_step(const Gemma4Assistant& a, Gemma4AssistantState& st, const KVCache& kv,
                           int pos, token_id t, const float* h, ThreadPool& pool);

}  // namespace specula
