// The one place drafters are built. load_speculative() loads what a SpeculativeConfig drafts with
// (the draft model, its vocabulary checked against the target's: token ids pass between the two,
// so a mismatch is an Error naming the first differing token); make_drafter() then builds a
// drafter over it, as often as needed (the server makes one per slot, and one per sampling
// request, over one loaded draft model).
#pragma once

#include <memory>
#include <string>

#include "model/session.h"
#include "sampling/penalties.h"
#include "sampling/sampler.h"
#include "speculative/config.h"
#include "speculative/drafters/dflash_head.h"
#include "speculative/drafters/drafter.h"
#include "speculative/drafters/eagle3_head.h"
#include "speculative/drafters/gemma4_assistant_head.h"
#include "speculative/drafters/medusa_head.h"
#include "speculative/drafters/suffix_drafter.h"

namespace specula {

struct SpeculativeSetup {
    SpeculativeConfig config;
    std::unique_ptr<Model> draft_model;  // method draft_model (and suffix with -md)
    const Model* target = nullptr;       // method mtp: the model whose MTP head drafts
    std::unique_ptr<Eagle3Head> eagle3;  // method eagle3: the head, fitted to the target
    // method suffix: the tree over recent outputs its drafters share (with -md, draft_model too)
    std::shared_ptr<SuffixCache> suffix_cache;
    std::unique_ptr<MedusaHeads> medusa;  // method medusa: the heads, fitted to the target
    std::unique_ptr<DFlashHead> dflash;   // method dflash: the drafter, fitted to the target
    // method gemma4_assistant (also mtp with a gemma4_mtp / gemma4-assistant -md, which
    // load_speculative turns into it): Gemma 4's assistant, fitted to the target
    std::unique_ptr<Gemma4Assistant> gemma4_assistant;
};

// The layers whose outputs the target's sessions must capture for the setup's drafter
// (SessionParams::capture_layers: an EAGLE-3 head's, a DFlash drafter's); empty for the others.
std::vector<int> capture_layers(const SpeculativeSetup& setup);
// Whether the target's sessions keep their final hidden rows (SessionParams::keep_hidden: Medusa's
// heads and Gemma 4's assistant read them).
bool keeps_hidden(const SpeculativeSetup& setup);

// Where one drafter runs and what it drafts for.
struct DrafterParams {
    int n_ctx = 0;                // draft context; 0: the draft model's training context
    int n_threads = 0;            // 0: hardware concurrency (unused with `pool`)
    SamplingParams sampling;      // the target's sampling (temp <= 0: greedy drafts)
    KVType type_k = KVType::F32;  // the draft model's KV cache types
    KVType type_v = KVType::F32;
    ThreadPool* pool = nullptr;  // a pool shared with other sessions (SessionParams::pool)
    // The draft model's pass buffers shared with the other drafters' sessions on `pool`, and its
    // cache on 4 KiB pages (SessionParams::shared_pass, kv_small_pages: a server's KV pool).
    std::shared_ptr<ForwardPass> shared_pass;
    bool kv_small_pages = false;
    int n_ubatch = SessionParams::kDefaultUbatch;  // the draft session's longest pass (-ub)
};

// target_name labels the vocabulary error (e.g. the target's path). Method eagle3 loads the head
// (-md), refused naming the key and both files when it does not fit the target. Method mtp on a
// target without an MTP head is an Error naming the target's file; with an MTP sidecar (-md) the
// target must have been loaded with it (LoadOptions::mtp_sidecar = mtp_sidecar(config)).
SpeculativeSetup load_speculative(const SpeculativeConfig& config, const Model& target,
                                  const std::string& target_name = "the target");

// The drafter the setup's method asks for; null for method none (plain decoding).
std::unique_ptr<Drafter> make_drafter(const SpeculativeSetup& setup, const DrafterParams& params);

}  // namespace specula
