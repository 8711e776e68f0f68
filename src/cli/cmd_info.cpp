// `specula info FILE`: a GGUF file described on stdout. Everything up to the tokenizer comes from
// the GGUF container alone (version, metadata, the `{arch}.*` hyperparameters, a tensor-type
// histogram, parameter count and memory needs), so it also works for architectures the engine
// cannot run; the last section says whether the engine can load the model, and if not, why.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "model/load/model.h"
#include "model/memory_plan.h"
#include "model/session.h"
#include "model/state/recurrent_state.h"
#include "tokenizer/tokenizer.h"

namespace specula::cli {

namespace {

void line(const std::string& key, const std::string& value) {
    std::printf("  %-34s %s\n", (key + ":").c_str(), value.c_str());
}

void print_file(const GGUFFile& f) {
    std::printf("file:\n");
    line("path", f.path());
    line("size", std::to_string(f.file_size()) + " bytes (" + format_bytes(f.file_size()) + ")");
    line("gguf version", std::to_string(f.version()));
    line("alignment", std::to_string(f.alignment()));
    line("metadata keys", std::to_string(f.metadata().size()));
    line("tensors", std::to_string(f.tensors().size()));
    for (const char* key : {"general.name", "general.architecture", "general.file_type",
                            "general.quantization_version"}) {
        if (const GGUFValue* v = f.find(key)) line(key, v->to_string());
    }
}

// Every `{arch}.*` key, as stored: this works for any architecture.
void print_hparams(const GGUFFile& f, const std::string& arch) {
    std::printf("hyperparameters (%s.*):\n", arch.c_str());
    const std::string prefix = arch + ".";
    for (const auto& [key, value] : f.metadata()) {
        if (key.compare(0, prefix.size(), prefix) == 0)
            line(key.substr(prefix.size()), value.to_string());
    }
}

struct TypeUse {
    int count = 0;
    uint64_t bytes = 0;
};

uint64_t print_tensors(const GGUFFile& f) {
    std::map<std::string, TypeUse> hist;
    int64_t n_params = 0;
    uint64_t n_bytes = 0;
    for (const GGUFTensor& t : f.tensors()) {
        std::string name(type_name(t.type));
        if (name.empty()) name = "type " + std::to_string(static_cast<uint32_t>(t.type));
        hist[name].count += 1;
        hist[name].bytes += t.nbytes;
        n_params += t.n_elements();
        n_bytes += t.nbytes;
    }
    std::printf("tensor types:\n");
    for (const auto& [name, use] : hist) {
        line(name, std::to_string(use.count) + " tensors, " + format_bytes(use.bytes));
    }
    std::printf("parameters:\n");
    line("count", std::to_string(n_params) + " (" + format_count(n_params) + ")");
    line("weights", format_bytes(n_bytes));
    return n_bytes;
}

// The context the memory line is for: -c when given, else the training context.
int64_t info_ctx(const GGUFFile& f, const std::string& arch, int n_ctx) {
    return n_ctx > 0 ? n_ctx : f.get_int_or(arch + ".context_length", 0);
}

// F16 K and V (the default cache type of run, chat and serve, as llama.cpp's) for every layer at
// n_ctx positions, from the GGUF keys (an MLA file's latent row once); 0 when unknown.
uint64_t kv_cache_bytes(const GGUFFile& f, const std::string& arch, int64_t n_ctx) {
    // Per-layer shapes (Gemma 4's arrays): the engine's line below says what the cache takes.
    for (const char* k : {".attention.head_count", ".attention.head_count_kv"}) {
        const GGUFValue* v = f.find(arch + k);
        if (v && v->type == GGUFType::ARRAY) return 0;
    }
    const int64_t n_layer = f.get_int_or(arch + ".block_count", 0);
    const int64_t n_embd = f.get_int_or(arch + ".embedding_length", 0);
    const int64_t n_head = f.get_int_or(arch + ".attention.head_count", 0);
    const int64_t n_head_kv = f.get_int_or(arch + ".attention.head_count_kv", n_head);
    if (n_ctx <= 0 || n_layer <= 0 || n_embd <= 0 || n_head <= 0) return 0;
    // MLA (deepseek2): one latent row of kv_lora_rank + rope dims per position, kept once.
    if (const int64_t lora = f.get_int_or(arch + ".attention.kv_lora_rank", 0); lora > 0) {
        const int64_t rope = f.get_int_or(arch + ".rope.dimension_count", 0);
        const int64_t nextn = f.get_int_or(arch + ".nextn_predict_layers", 0);
        return static_cast<uint64_t>(std::max<int64_t>(0, n_layer - nextn) * n_ctx *
                                     (lora + std::max<int64_t>(0, rope)) * 2);
    }
    const int64_t k_dim = f.get_int_or(arch + ".attention.key_length", n_embd / n_head);
    const int64_t v_dim = f.get_int_or(arch + ".attention.value_length", k_dim);
    return static_cast<uint64_t>(n_layer * n_ctx * n_head_kv * (k_dim + v_dim) * 2);
}

void print_memory(const GGUFFile& f, const std::string& arch, uint64_t weight_bytes, int ctx) {
    const int64_t n_ctx = info_ctx(f, arch, ctx);
    const uint64_t kv = kv_cache_bytes(f, arch, n_ctx);
    std::printf("memory:\n");
    line("weights", format_bytes(weight_bytes));
    if (kv == 0) {
        line("kv cache", "unknown from the keys alone (see the engine's line)");
        return;
    }
    line("kv cache (f16)", format_bytes(kv) + " at n_ctx " + std::to_string(n_ctx));
    line("total", format_bytes(weight_bytes + kv));
}

void print_tokenizer(const GGUFFile& f) {
    std::printf("tokenizer:\n");
    std::unique_ptr<Tokenizer> tok;
    try {
        tok = Tokenizer::from_gguf(f);
    } catch (const Error& e) {
        line("unusable", e.what());
        return;
    }
    const GGUFValue* merges = f.find("tokenizer.ggml.merges");
    line("model", tok->model());
    line("pre", tok->pre().empty() ? "(none)" : tok->pre());
    line("n_vocab", std::to_string(tok->n_vocab()));
    line("bos", std::to_string(tok->bos()));
    line("eos", std::to_string(tok->eos()));
    line("add_bos", tok->add_bos() ? "true" : "false");
    line("merges", std::to_string(merges ? merges->arr.size() : 0));
    line("chat template", f.has("tokenizer.chat_template") ? "present" : "none");
}

// Layers of their own shapes or sharing another's cache (gemma4): what each kind of layer keeps.
// A Mamba-2 hybrid's (nemotron_h) kinds: what each keeps per sequence.
std::string mamba2_kinds(const HParams& hp) {
    int n_att = 0;
    for (int il = 0; il < hp.n_layer; ++il)
        n_att += !hp.is_recurrent(il) && hp.layer_n_head_kv(il) > 0;
    const int n_ssm = hp.n_recurrent();
    return std::to_string(n_ssm) +
           " Mamba-2 (a recurrent state each: " + std::to_string(hp.ssm_dt_rank) + " heads of " +
           std::to_string(hp.ssm_d_inner / hp.ssm_dt_rank) + " x state " +
           std::to_string(hp.ssm_d_state) + ", no cache), " + std::to_string(n_att) +
           " attention (the KV cache, heads of " + std::to_string(hp.head_dim) + "), " +
           std::to_string(hp.n_layer - n_ssm - n_att) + " MLP (nothing kept)";
}

std::string layer_shapes(const HParams& hp) {
    if (hp.ssm_kind == HParams::SsmKind::Mamba2) return mamba2_kinds(hp);
    if (hp.n_head_kv_arr.empty() && hp.head_dim_swa == 0 && hp.kv_src.empty()) return "";
    int n_swa = 0, n_shared = 0;
    for (int il = 0; il < hp.n_layer; ++il) {
        n_swa += hp.is_swa(il);
        n_shared += !hp.own_kv(il);
    }
    std::string s =
        std::to_string(n_swa) + " sliding (window " + std::to_string(hp.n_swa) + ", heads of " +
        std::to_string(hp.head_dim_swa ? hp.head_dim_swa : hp.head_dim) + "), " +
        std::to_string(hp.n_layer - n_swa) + " full (heads of " + std::to_string(hp.head_dim) + ")";
    if (n_shared > 0)
        s += "; the last " + std::to_string(n_shared) + " read earlier layers' caches (none kept)";
    return s;
}

// Loads the model for real: the only way to know that the engine can run it.
void print_support(const std::string& path, int n_ctx) {
    std::printf("engine:\n");
    try {
        auto model = Model::load(path);
        line("supported", "yes: " + model->describe());
        // The cache a session allocates (sliding-window layers keep only their window).
        CachePlan cp;
        cp.n_ctx = n_ctx;
        cp.n_threads = 1;
        const MemoryPlan plan = plan_memory(*model, nullptr, cp, 0);
        line("kv cache (f16, as run allocates)",
             format_bytes(uint64_t(plan.target_kv)) + " at n_ctx " +
                 std::to_string(resolve_ctx(model->hparams(), n_ctx)));
        if (const HParams& hp = model->hparams(); hp.mla_kv_lora_rank > 0) {
            line("attention",
                 "MLA: the cache keeps a latent row of " + std::to_string(hp.mla_kv_lora_rank) +
                     " + " + std::to_string(hp.n_rot) + " rope values per position (for " +
                     std::to_string(hp.n_head) + " heads of " + std::to_string(hp.mla_head_k) +
                     " / " + std::to_string(hp.mla_head_v) + ")" +
                     (hp.kv_v_is_k ? ", stored once: V reads K's rows (of -ctk's type; -ctv "
                                     "does not apply)"
                                   : ""));
        }
        if (const std::string l = layer_shapes(model->hparams()); !l.empty())
            line("layer kinds", l);
        if (const double rs = RecurrentState::bytes(model->hparams()); rs > 0) {
            line("recurrent state (f32, in the kv cache line)",
                 format_bytes(uint64_t(rs)) + " for " +
                     std::to_string(model->hparams().n_recurrent()) +
                     (model->hparams().ssm_kind == HParams::SsmKind::Mamba2 ? " Mamba-2"
                                                                            : " DeltaNet") +
                     " layers (state, rollback snapshot, kept pass inputs)");
        }
    } catch (const Error& e) {
        line("supported", std::string("no: ") + e.what());
    }
}

}  // namespace

int cmd_info(const InfoOptions& opt) {
    if (opt.n_ctx < 0) fail("-c (--ctx-size) must be >= 0, got ", opt.n_ctx);
    auto file = GGUFFile::open(opt.model);
    const std::string arch = file->get_string_or("general.architecture", "");
    print_file(*file);
    if (!arch.empty()) print_hparams(*file, arch);
    const uint64_t weight_bytes = print_tensors(*file);
    print_memory(*file, arch, weight_bytes, opt.n_ctx);
    print_tokenizer(*file);
    file.reset();
    print_support(opt.model, opt.n_ctx);
    return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace specula::cli
