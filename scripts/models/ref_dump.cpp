// ref_dump: writes a reference JSON ("llama-ref-dump/1", the layout of
// ../shared/reference/README.md section 4, without its optional blocks) for one GGUF file by
// running it through a llama.cpp-family library (ik_llama.cpp's libllama). For each prompt of a
// prompts JSON: tokenise (add_special, no parse_special), evaluate all prompt tokens in one
// llama_decode with logits at every position (prompt_top: top-10 per position), then 32 greedy
// tokens one llama_decode each (argmax, ties to the lowest id; greedy.steps: top-10 per step).
// K cache F32 and V cache F16 (ik_llama.cpp refuses an F32 V cache without flash attention, and
// its flash attention does not take every head size), flash attention off (with REF_DUMP_FA=1:
// on, and the K cache F16, for the architectures whose graph needs it), 1 thread,
// n_ctx = n_batch = n_ubatch = 512.
// Built and run by scripts/models/make_arch_refs.sh; not part of the Specula build.
//   usage: ref_dump MODEL.gguf PROMPTS.json REL_PATH > OUT.json
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"
#include "ref_prompts.h"

namespace {

constexpr int kTop = 10, kGen = 32, kCtx = 512;

std::string esc(const std::string& s) {
    std::string o;
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += static_cast<char>(c);
        } else if (c < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", c);
            o += b;
        } else {
            o += static_cast<char>(c);
        }
    }
    return o;
}

std::vector<int> top_ids(const float* l, int nv) {
    std::vector<int> id(nv);
    for (int i = 0; i < nv; ++i) id[i] = i;
    std::partial_sort(id.begin(), id.begin() + kTop, id.end(),
                      [&](int a, int b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    id.resize(kTop);
    return id;
}

std::string top_json(const float* l, int nv, std::vector<float>* gaps) {
    const auto id = top_ids(l, nv);
    gaps->push_back(l[id[0]] - l[id[1]]);
    std::string o = "[";
    char b[64];
    for (int k = 0; k < kTop; ++k) {
        std::snprintf(b, sizeof b, "%s[%d, %.9g]", k ? ", " : "", id[k], l[id[k]]);
        o += b;
    }
    return o + "]";
}

std::string gap_stats(std::vector<float> g) {
    std::sort(g.begin(), g.end());
    char b[160];
    std::snprintf(b, sizeof b, "{\"n\": %zu, \"min\": %.9g, \"median\": %.9g, \"max\": %.9g}",
                  g.size(), g.front(), g[g.size() / 2], g.back());
    return b;
}

std::string meta(const llama_model* m, const std::string& key) {
    char b[256] = {0};
    return llama_model_meta_val_str(m, key.c_str(), b, sizeof b) < 0 ? "" : b;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: ref_dump MODEL.gguf PROMPTS.json REL_PATH\n");
        return 2;
    }
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    // The context's MLA mode (3): an MLA model (deepseek2) derives its wk_b / wv_b at load with
    // it; the default 0 leaves them unmade and the graph crashes.
    mp.mla = llama_context_default_params().mla_attn;
    llama_model* model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = kCtx;
    cp.n_threads = cp.n_threads_batch = 1;
    // Flash attention where the architecture's graph needs it (gemma4: its attention without it
    // mixes up V = K and the shared layers' caches; make_arch_refs.sh passes REF_DUMP_FA=1).
    const char* fa_env = std::getenv("REF_DUMP_FA");
    const bool fa = fa_env && std::string(fa_env) == "1";
    cp.flash_attn = fa;
    cp.type_k = fa ? GGML_TYPE_F16 : GGML_TYPE_F32;  // its flash attention takes no F32 cache
    cp.type_v = GGML_TYPE_F16;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) return 1;
    const int nv = llama_n_vocab(model);
    const std::string arch = meta(model, "general.architecture");
    std::string file = argv[1];
    file = file.substr(file.find_last_of('/') + 1);
    char desc[128];
    llama_model_desc(model, desc, sizeof desc);

    std::printf("{\n\"format\": \"llama-ref-dump/1\",\n\"model\": {\"file\": \"%s\", ",
                file.c_str());
    std::printf("\"general.name\": \"%s\", \"general.architecture\": \"%s\", ",
                esc(meta(model, "general.name")).c_str(), arch.c_str());
    std::printf("\"general.file_type\": \"%s\", \"llama_model_desc\": \"%s\", ",
                meta(model, "general.file_type").c_str(), esc(desc).c_str());
    std::printf("\"n_params\": %llu, \"n_vocab\": %d, \"n_ctx_train\": %d, \"n_embd\": %d, ",
                (unsigned long long)llama_model_n_params(model), nv, llama_n_ctx_train(model),
                llama_model_n_embd(model));
    std::printf("\"n_layer\": %d, \"n_head\": %s, \"bos_id\": %d, \"path\": \"%s\"},\n",
                llama_n_layer(model), meta(model, arch + ".attention.head_count").c_str(),
                llama_token_bos(model), argv[3]);
    std::printf(
        "\"eval\": {\"engine\": \"ik_llama.cpp (CPU)\", \"n_threads\": 1, \"n_ctx\": %d, "
        "\"type_k\": \"%s\", \"type_v\": \"f16\", \"flash_attn\": %s, \"top_k\": %d, "
        "\"n_gen\": %d},\n",
        kCtx, fa ? "f16" : "f32", fa ? "true" : "false", kTop, kGen);
    std::printf("\"prompts\": [\n");
    std::vector<float> all_gaps;
    const auto prompts = ref_prompts::read_prompts(argv[2]);
    for (size_t pi = 0; pi < prompts.size(); ++pi) {
        const auto& [name, text] = prompts[pi];
        std::vector<llama_token> ids(text.size() + 8);
        const int n = llama_tokenize(model, text.c_str(), int(text.size()), ids.data(),
                                     int(ids.size()), true, false);
        ids.resize(n);
        llama_kv_cache_clear(ctx);
        llama_batch b = llama_batch_init(kCtx, 0, 1);
        b.n_tokens = n;
        for (int i = 0; i < n; ++i) {
            b.token[i] = ids[i];
            b.pos[i] = i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = 0;
            b.logits[i] = 1;
        }
        if (llama_decode(ctx, b) != 0) return 1;
        std::vector<float> pgaps, ggaps;
        std::printf(
            "{\"name\": \"%s\", \"text\": \"%s\", \"n_prompt_tokens\": %d, \"token_ids\": [",
            name.c_str(), esc(text).c_str(), n);
        for (int i = 0; i < n; ++i) std::printf("%s%d", i ? ", " : "", ids[i]);
        std::printf("],\n \"prompt_top\": [\n");
        for (int i = 0; i < n; ++i) {
            std::printf("  %s%s\n", top_json(llama_get_logits_ith(ctx, i), nv, &pgaps).c_str(),
                        i + 1 < n ? "," : "");
        }
        const float* last = llama_get_logits_ith(ctx, n - 1);
        llama_token tok = top_ids(last, nv)[0];
        std::vector<llama_token> gen;
        std::vector<std::string> steps;
        for (int s = 0; s < kGen; ++s) {
            gen.push_back(tok);
            b.n_tokens = 1;
            b.token[0] = tok;
            b.pos[0] = n + s;
            b.logits[0] = 1;
            if (llama_decode(ctx, b) != 0) return 1;
            const float* l = llama_get_logits_ith(ctx, 0);
            steps.push_back("{\"pos\": " + std::to_string(n + s) + ", \"input_token\": " +
                            std::to_string(tok) + ", \"top\": " + top_json(l, nv, &ggaps) + "}");
            tok = top_ids(l, nv)[0];
        }
        llama_batch_free(b);
        std::printf(" ],\n \"greedy\": {\"token_ids\": [");
        for (int s = 0; s < kGen; ++s) std::printf("%s%d", s ? ", " : "", gen[s]);
        std::printf("],\n  \"steps\": [\n");
        for (int s = 0; s < kGen; ++s) {
            std::printf("   %s%s\n", steps[s].c_str(), s + 1 < kGen ? "," : "");
        }
        std::printf(
            "  ]},\n \"checks\": {\"top1_top2_gap_prompt_positions\": %s, "
            "\"top1_top2_gap_greedy_decisions\": %s}}%s\n",
            gap_stats(pgaps).c_str(), gap_stats(ggaps).c_str(), pi + 1 < prompts.size() ? "," : "");
        all_gaps.insert(all_gaps.end(), pgaps.begin(), pgaps.end());
        all_gaps.insert(all_gaps.end(), ggaps.begin(), ggaps.end());
    }
    std::printf("],\n\"summary\": {\"top1_top2_gap_all_decisions\": %s}\n}\n",
                gap_stats(all_gaps).c_str());
    llama_free(ctx);
    llama_free_model(model);
    llama_backend_free();
    return 0;
}
