// load_speculative / make_drafter: see make_drafter.h.
#include "speculative/make_drafter.h"

#include "common/error.h"
#include "speculative/drafters/dflash.h"
#include "speculative/drafters/draft_model_drafter.h"
#include "speculative/drafters/eagle3.h"
#include "speculative/drafters/gemma4_assistant.h"
#include "speculative/drafters/medusa_drafter.h"
#include "speculative/drafters/mtp_drafter.h"
#include "speculative/drafters/ngram_drafter.h"
#include "speculative/vocab_check.h"

namespace specula {

SpeculativeSetup load_speculative(const SpeculativeConfig& config, const Model& target,
                                  const std::string& target_name) {
    SpeculativeSetup s;
    s.config = config;
    // Gemma 4's assistant: its own method, or ik_llama.cpp's way, an MTP companion (-md).
    const bool assistant = config.method == SpecMethod::gemma4_assistant ||
                           (config.method == SpecMethod::mtp && !config.draft_model.empty() &&
                            Gemma4Assistant::is_assistant_file(config.draft_model));
    if (assistant) {
        s.gemma4_assistant = Gemma4Assistant::load(config.draft_model, target);
        s.config.method = SpecMethod::gemma4_assistant;
    }
    if (config.method == SpecMethod::mtp && !assistant) {
        if (!target.has_mtp()) {
            fail(target.file().path(), ": --spec-type mtp needs the model's MTP head, and it has ",
                 "none (key '", target.hparams().arch, ".nextn_predict_layers' is 0 or missing, ",
                 "no blk.N.nextn.* tensors); an MTP sidecar file can give one (-md)");
        }
        const std::string sidecar = mtp_sidecar(config);
        if (!sidecar.empty() && (!target.mtp_file() || target.mtp_file()->path() != sidecar)) {
            fail("--spec-type mtp -md ", sidecar, ": ", target.file().path(),
                 " was loaded without it (LoadOptions::mtp_sidecar)");
        }
        s.target = &target;
    }
    if (config.method == SpecMethod::eagle3)
        s.eagle3 = Eagle3Head::load(config.draft_model, target);
    if (config.method == SpecMethod::medusa)
        s.medusa = MedusaHeads::load(config.draft_model, target);
    if (config.method == SpecMethod::dflash)
        s.dflash = DFlashHead::load(config.draft_model, target);
    if (config.method == SpecMethod::suffix)
        s.suffix_cache = std::make_shared<SuffixCache>(config.suffix);
    if (config.method == SpecMethod::draft_model ||
        (config.method == SpecMethod::suffix && !config.draft_model.empty())) {
        if (Gemma4Assistant::is_assistant_file(config.draft_model))
            fail(config.draft_model,
                 ": Gemma 4's assistant is not a draft model: use "
                 "--spec-type gemma4-assistant (or mtp) with it");
        s.draft_model = Model::load(
            config.draft_model,
            LoadOptions{.gpu = config.draft_gpu, .repack_cache = config.draft_repack_cache});
        check_vocab_compatible(target.tokenizer(), s.draft_model->tokenizer(), target_name,
                               config.draft_model);
    }
    return s;
}

namespace {

std::unique_ptr<Drafter> draft_model_drafter(const SpeculativeSetup& setup,
                                             const DrafterParams& params) {
    DraftModelParams dp;
    dp.n_ctx = params.n_ctx;
    dp.n_threads = params.n_threads;
    dp.pool = params.pool;
    dp.shared_pass = params.shared_pass;
    dp.kv_small_pages = params.kv_small_pages;
    dp.n_ubatch = params.n_ubatch;
    dp.p_min = setup.config.p_min;
    dp.sampling = params.sampling;
    dp.type_k = params.type_k;
    dp.type_v = params.type_v;
    return std::make_unique<DraftModelDrafter>(*setup.draft_model, dp);
}

}  // namespace

std::unique_ptr<Drafter> make_drafter(const SpeculativeSetup& setup, const DrafterParams& params) {
    switch (setup.config.method) {
        case SpecMethod::draft_model:
            return draft_model_drafter(setup, params);
        case SpecMethod::suffix:
            return std::make_unique<SuffixDrafter>(
                setup.config.suffix, setup.suffix_cache,
                setup.draft_model ? draft_model_drafter(setup, params) : nullptr);
        case SpecMethod::medusa:
            return std::make_unique<MedusaDrafter>(*setup.medusa);
        case SpecMethod::ngram:
            return std::make_unique<NgramDrafter>(setup.config.ngram);
        case SpecMethod::mtp:
            return std::make_unique<MtpDrafter>(*setup.target, params.sampling);
        case SpecMethod::eagle3:
            return std::make_unique<Eagle3Drafter>(*setup.eagle3, params.sampling, params.n_ctx,
                                                   params.type_k, params.type_v,
                                                   setup.config.p_min);
        case SpecMethod::dflash:
            return std::make_unique<DFlashDrafter>(*setup.dflash, params.sampling, params.n_ctx,
                                                   params.type_k, params.type_v,
                                                   setup.config.p_min);
        case SpecMethod::gemma4_assistant:
            return std::make_unique<Gemma4AssistantDrafter>(*setup.gemma4_assistant,
                                                            params.sampling, setup.config.p_min);
        case SpecMethod::none:
            break;
    }
    return nullptr;
}

std::vector<int> capture_layers(const SpeculativeSetup& setup) {
    if (setup.dflash) return setup.dflash->capture;
    return setup.eagle3 ? setup.eagle3->capture : std::vector<int>{};
}

bool keeps_hidden(const SpeculativeSetup& setup) {
    return setup.medusa != nullptr || setup.gemma4_assistant != nullptr;
}

}  // namespace specula
