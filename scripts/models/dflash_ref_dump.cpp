// dflash_ref_dump: writes ik_llama.cpp's DFlash block drafts and their logits for a target and a
// `dflash-draft` file, as JSON ("ik-dflash-dump/1"), for tests/speculative/test_dflash.cpp. Not
// part of the Specula build: built and run by scripts/models/make_dflash_refs.sh against
// ik_llama.cpp's libllama and libcommon (its DFlash runs through common/speculative's state).
//
// For each prompt of a prompts JSON, from an empty cache (1 thread, flash attention on:
// ik_llama.cpp's DFlash needs it, F16 K/V, n_ctx 512): the target evaluates the prompt t_0 ..
// t_{n-1} in one batch and hands its features (the outputs of the drafter's target layers, every
// row) to the drafter; "next" is the argmax of the target's last row; the drafter proposes K tokens
// in one pass over [next, mask x K] at positions n .. n + K ("drafts", and the top-10 logits of
// each mask row, "rows"). Then a second step: the target evaluates [next, d_1, d_2] at n .. n + 2,
// all three rows' features are handed on (as if both drafts were kept), "next2" is the argmax of
// its last row, and the drafter proposes again from it ("drafts2", "rows2"). The logits come from
// the draft graph's "result_output" tensor (ik_llama.cpp skips copying them out when the graph
// takes the argmax), read through an eval callback on the drafter's context.
//   usage: dflash_ref_dump TARGET.gguf DRAFT.gguf PROMPTS.json K > OUT.json
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "common.h"
#include "llama-context.h"
#include "llama.h"
#include "ref_prompts.h"
#include "speculative.h"

namespace {

std::vector<float> g_rows;  // the last draft pass's result_output (n_vocab per row)

int grab_logits(ggml_tensor* t, bool ask, void*) {
    if (std::strcmp(t->name, "result_output") != 0) return 0;
    if (ask) return 1;
    g_rows.assign(static_cast<const float*>(t->data),
                  static_cast<const float*>(t->data) + ggml_nelements(t));
    return 1;
}

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

// One proposal from `next`: prints the drafts and the top-10 logits of each mask row.
bool propose(common_speculative* spec, gpt_params& params, llama_token next, int k, int nv,
             const char* drafts_key, const char* rows_key, llama_tokens& drafts) {
    g_rows.clear();
    drafts = common_speculative_draft(spec, params.speculative, {}, next);
    if (int(drafts.size()) != k || g_rows.size() != size_t(k) * size_t(nv)) return false;
    std::printf(", \"%s\": [", drafts_key);
    for (size_t i = 0; i < drafts.size(); ++i) std::printf("%s%d", i ? ", " : "", drafts[i]);
    std::printf("], \"%s\": [", rows_key);
    for (int r = 0; r < k; ++r) {
        std::printf("%s", r ? ", " : "");
        print_top(g_rows.data() + size_t(r) * size_t(nv), nv);
    }
    std::printf("]");
    return true;
}

// The target evaluates toks at pos0.. (every row's logits) and hands the rows' features on.
bool target_eval(common_speculative* spec, llama_context* ctx, const llama_tokens& toks, int pos0,
                 bool prompt) {
    llama_batch b = llama_batch_init(int(toks.size()), 0, 1);
    for (size_t i = 0; i < toks.size(); ++i) common_batch_add(b, toks[i], pos0 + int(i), {0}, true);
    const bool ok = llama_decode(ctx, b) == 0 &&
                    common_speculative_on_target_seq_batch(spec, ctx, b, 0, prompt) == 0;
    llama_batch_free(b);
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: dflash_ref_dump TARGET.gguf DRAFT.gguf PROMPTS.json K\n");
        return 2;
    }
    const int k = std::atoi(argv[4]);
    std::vector<std::string> args = {"dflash_ref_dump",
                                     "-m",
                                     argv[1],
                                     "-md",
                                     argv[2],
                                     "-t",
                                     "1",
                                     "-c",
                                     "512",
                                     "-b",
                                     "512",
                                     "-ub",
                                     "512",
                                     "-fa",
                                     "on",
                                     "--temp",
                                     "0",
                                     "--spec-type",
                                     "dflash:n_max=" + std::to_string(k) + ",p_min=0.0"};
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
    llama_context* ctx_dft = common_speculative_get_companion_ctx(spec);
    if (!ctx_dft) return 1;
    ctx_dft->cparams.cb_eval = grab_logits;
    ctx_dft->cparams.cb_eval_user_data = nullptr;
    const int nv = llama_n_vocab(model);

    std::printf("{\"format\": \"ik-dflash-dump/1\", \"n_vocab\": %d, \"k\": %d, \"prompts\": [", nv,
                k);
    const auto prompts = ref_prompts::read_prompts(argv[3]);
    for (size_t p = 0; p < prompts.size(); ++p) {
        const llama_tokens toks = common_tokenize(ctx, prompts[p].second, true, false);
        const int n = int(toks.size());
        std::printf("%s\n{\"tokens\": [", p ? "," : "");
        for (int i = 0; i < n; ++i) std::printf("%s%d", i ? ", " : "", toks[size_t(i)]);
        std::printf("]");
        common_speculative_clear_sequence_kv(spec, ctx, 0);
        if (!target_eval(spec, ctx, toks, 0, true)) return 1;
        common_speculative_begin(spec, {});
        const llama_token next = argmax(llama_get_logits_ith(ctx, n - 1), nv);
        std::printf(", \"next\": %d", next);
        llama_tokens drafts;
        if (!propose(spec, params, next, k, nv, "drafts", "rows", drafts)) return 1;
        // The drafts are not checked: the second step takes the first two as kept.
        const llama_tokens step = {next, drafts[0], drafts[1]};
        if (!target_eval(spec, ctx, step, n, false)) return 1;
        const llama_token next2 = argmax(llama_get_logits_ith(ctx, 2), nv);
        std::printf(", \"next2\": %d", next2);
        if (!propose(spec, params, next2, k, nv, "drafts2", "rows2", drafts)) return 1;
        std::printf("}");
    }
    std::printf("\n]}\n");
    common_speculative_free(spec);
    llama_free(ctx);
    llama_free_model(model);
    return 0;
}
