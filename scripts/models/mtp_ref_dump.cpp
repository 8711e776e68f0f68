// mtp_ref_dump: writes ik_llama.cpp's MTP (nextn) head logits for one GGUF file with an MTP layer
// (qwen35 / qwen35moe), as JSON ("ik-mtp-dump/1"), for tests/model/test_mtp_parity.cpp. Not part of
// the Specula build: built and run by scripts/models/make_mtp_refs.sh against ik_llama.cpp's
// libllama and libcommon (its MTP runs through common/speculative's state).
//
// For each prompt of a prompts JSON, from an empty cache: the target evaluates the prompt
// t_0 .. t_{n-1} in one batch (1 thread, F32 K / F16 V cache, flash attention off, n_ctx 512),
// the head warms up over it (ik_llama.cpp gives MTP row j the token t_j and the target hidden
// h_{j-1}, zeros for row 0), then drafts K tokens greedily from t_n = argmax of the target's
// last row (draft row 1: [t_n, h_{n-1}], row 2: [draft 1, the head's own output], ...). Written
// per prompt: the prompt's tokens, t_n ("next"), the drafts, and the top-10 logits of the last
// draft row ("last"; ik_llama.cpp keeps only that row's logits).
//   usage: mtp_ref_dump MODEL.gguf PROMPTS.json K [ASSISTANT.gguf] > OUT.json
// With ASSISTANT.gguf (Gemma 4's assistant, a gemma4-assistant or gemma4_mtp file, loaded as
// ik_llama.cpp's -md MTP companion) the same for the assistant: no warm-up (it reads the target's
// KV cache), every draft row at position n (ik_llama.cpp holds the assistant's positions
// constant), row 1 from [t_n, h_{n-1}], each further row from [the draft before, the assistant's
// own projected output]; with flash attention and an F16 K cache (ik_llama.cpp's gemma4 runs its
// reference configuration there: without flash attention its target's greedy token differs from
// its own architecture reference's).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "common.h"
#include "llama.h"
#include "ref_prompts.h"
#include "speculative.h"

namespace {

void print_top(const float* logits, int nv) {
    std::vector<int> ids(static_cast<size_t>(nv));
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + 10, ids.end(), [&](int a, int b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    std::printf("[");
    for (int i = 0; i < 10; ++i)
        std::printf("%s[%d, %.6f]", i ? ", " : "", ids[size_t(i)], logits[ids[size_t(i)]]);
    std::printf("]");
}

int argmax(const float* x, int n) {
    int b = 0;
    for (int i = 1; i < n; ++i)
        if (x[i] > x[b]) b = i;
    return b;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4 && argc != 5) {
        std::fprintf(stderr, "usage: mtp_ref_dump MODEL.gguf PROMPTS.json K [ASSISTANT.gguf]\n");
        return 2;
    }
    const int k = std::atoi(argv[3]);
    std::vector<std::string> args = {"mtp_ref_dump",
                                     "-m",
                                     argv[1],
                                     "-t",
                                     "1",
                                     "-c",
                                     "512",
                                     "-b",
                                     "512",
                                     "-ub",
                                     "512",
                                     "-ctk",
                                     argc == 5 ? "f16" : "f32",
                                     "-ctv",
                                     "f16",
                                     "-fa",
                                     argc == 5 ? "on" : "off",
                                     "--temp",
                                     "0",
                                     "--spec-type",
                                     "mtp:n_max=" + std::to_string(k) + ",p_min=0.0"};
    if (argc == 5) args.insert(args.end(), {"-md", argv[4]});
    std::vector<char*> av;
    for (auto& a : args) av.push_back(a.data());
    gpt_params params;
    if (!gpt_params_parse(int(av.size()), av.data(), params)) return 1;
    common_speculative_prepare_startup(params);
    llama_backend_init();
    llama_init_result init = llama_init_from_gpt_params(params);
    llama_model* model = init.model;
    llama_context* ctx = init.context;
    if (!model || !ctx || !common_speculative_finalize_startup(params, model)) return 1;
    common_speculative* spec = nullptr;
    if (common_speculative_try_init(params.speculative, ctx, &spec) !=
        COMMON_SPECULATIVE_INIT_READY)
        return 1;
    llama_context* ctx_mtp = common_speculative_get_companion_ctx(spec);
    const int nv = llama_n_vocab(model);

    std::printf("{\"format\": \"ik-mtp-dump/1\", \"n_vocab\": %d, \"k\": %d, \"prompts\": [", nv,
                k);
    const auto prompts = ref_prompts::read_prompts(argv[2]);
    for (size_t p = 0; p < prompts.size(); ++p) {
        const llama_tokens toks = common_tokenize(ctx, prompts[p].second, true, false);
        const int n = int(toks.size());
        std::printf("%s\n{\"tokens\": [", p ? "," : "");
        for (int i = 0; i < n; ++i) std::printf("%s%d", i ? ", " : "", toks[size_t(i)]);
        std::printf("]");
        llama_batch b = llama_batch_init(n, 0, 1);
        for (int i = 0; i < n; ++i) common_batch_add(b, toks[size_t(i)], i, {0}, true);
        // A target without nextn layers extracts no logits while it returns embeddings: the
        // assistant's t_n comes from a pass of its own first.
        llama_token next_plain = -1;
        if (argc == 5) {
            common_speculative_clear_sequence_kv(spec, ctx, 0);
            if (llama_decode(ctx, b) != 0) return 1;
            next_plain = argmax(llama_get_logits_ith(ctx, n - 1), nv);
        }
        common_speculative_clear_sequence_kv(spec, ctx, 0);
        llama_set_embeddings(ctx, true);
        if (llama_decode(ctx, b) != 0 ||
            common_speculative_on_target_seq_batch(spec, ctx, b, 0, true) != 0)
            return 1;
        llama_batch_free(b);
        common_speculative_begin(spec, {});
        if (!common_speculative_capture_output_hidden(spec, ctx, n - 1, 0, n - 1)) return 1;
        llama_set_embeddings(ctx, false);
        const llama_token next =
            argc == 5 ? next_plain : argmax(llama_get_logits_ith(ctx, n - 1), nv);
        const llama_tokens drafts =
            argc == 5 ? common_speculative_draft(spec, params.speculative, toks, next, n, 0)
                      : common_speculative_draft(spec, params.speculative, {}, next);
        if (int(drafts.size()) != k) return 1;
        std::printf(", \"next\": %d, \"drafts\": [", next);
        for (size_t i = 0; i < drafts.size(); ++i) std::printf("%s%d", i ? ", " : "", drafts[i]);
        std::printf("], \"last\": ");
        print_top(llama_get_logits_ith(ctx_mtp, -1), nv);
        std::printf("}");
    }
    std::printf("\n]}\n");
    common_speculative_free(spec);
    llama_free(ctx);
    llama_free_model(model);
    return 0;
}
