// Model::load: opens the GGUF, finds its architecture in the registry (model/load/arch.h), builds
// the tokenizer, and lets the architecture read its hyperparameters and bind its weights; then
// repacks them (pack.cpp). Also the model's summaries (n_params, bytes_per_token, describe).
#include "model/load/model.h"

#include <cstdio>
#include <map>
#include <sstream>

#include "common/error.h"
#include "kernels/quants.h"
#include "model/load/arch.h"
#include "model/load/file_checks.h"

namespace specula {

namespace {

// llama_ftype names, as llama.cpp prints them.
std::string ftype_name(int64_t ft) {
    static const std::map<int64_t, const char*> names = {
        {0, "all F32"},  {1, "F16"},      {2, "Q4_0"},       {3, "Q4_1"},    {7, "Q8_0"},
        {8, "Q5_0"},     {9, "Q5_1"},     {10, "Q2_K"},      {11, "Q3_K_S"}, {12, "Q3_K_M"},
        {13, "Q3_K_L"},  {14, "Q4_K_S"},  {15, "Q4_K_M"},    {16, "Q5_K_S"}, {17, "Q5_K_M"},
        {18, "Q6_K"},    {19, "IQ2_XXS"}, {20, "IQ2_XS"},    {21, "Q2_K_S"}, {22, "IQ3_XS"},
        {23, "IQ3_XXS"}, {24, "IQ1_S"},   {25, "IQ4_NL"},    {26, "IQ3_S"},  {27, "IQ3_M"},
        {28, "IQ2_S"},   {29, "IQ2_M"},   {30, "IQ4_XS"},    {31, "IQ1_M"},  {32, "BF16"},
        {36, "TQ1_0"},   {37, "TQ2_0"},   {38, "MXFP4 MoE"},
    };
    auto it = names.find(ft);
    return it != names.end() ? it->second : "file type " + std::to_string(ft);
}

std::string human_count(int64_t n) {
    char buf[32];
    if (n >= 1000000000)
        std::snprintf(buf, sizeof buf, "%.2fB", n / 1e9);
    else if (n >= 1000000)
        std::snprintf(buf, sizeof buf, "%.2fM", n / 1e6);
    else
        std::snprintf(buf, sizeof buf, "%.1fK", n / 1e3);
    return buf;
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& opts) {
    auto m = std::make_unique<Model>();
    m->file_ = GGUFFile::open(path);
    // Architecture first, so a foreign model fails with that message rather than a tokenizer one.
    m->arch_ = &find_arch(m->file_->get_string("general.architecture"), path);
    m->tok_ = Tokenizer::from_gguf(*m->file_);
    m->hp_.arch = m->arch_->name;
    m->hp_.n_vocab = m->tok_->n_vocab();
    if (m->hp_.n_vocab <= 0) fail(path, ": the vocabulary is empty");
    m->arch_->read(*m->file_, m->hp_);
    check_model_file(*m->file_, m->hp_, {opts.check_tensors, opts.n_threads});
    TensorBinder binder(*m->file_, *m);
    m->arch_->bind(binder, m->hp_, *m);
    if (!opts.mtp_sidecar.empty()) m->attach_mtp_sidecar(opts.mtp_sidecar);
    if (opts.repack) pack_weights(*m, opts.n_threads, opts.repack_cache);
    m->placement_ = opts.gpu;
    return m;
}

int64_t Model::n_params() const {
    int64_t n = 0;
    for (const auto& t : file_->tensors()) n += t.n_elements();
    if (mtp_file_)
        for (const auto& t : mtp_file_->tensors()) n += t.n_elements();
    return n;
}

int64_t Model::bytes_per_token() const {
    auto bytes = [](const WeightView& w) {
        return w.data ? static_cast<int64_t>(w.row_bytes()) * w.rows : int64_t{0};
    };
    int64_t n = bytes(output);
    for (const LayerWeights& l : layers) {
        n += bytes(l.wq) + bytes(l.wk) + bytes(l.wv) + bytes(l.wqkv) + bytes(l.wo);
        n += bytes(l.ffn_gate) + bytes(l.ffn_up) + bytes(l.ffn_gate_up) + bytes(l.ffn_down);
        // A recurrent layer's projections (qwen35's DeltaNet, nemotron_h's Mamba-2).
        n += bytes(l.ssm_qkv) + bytes(l.ssm_gate) + bytes(l.ssm_beta) + bytes(l.ssm_alpha) +
             bytes(l.ssm_in) + bytes(l.ssm_out);
        const int64_t experts =
            bytes(l.ffn_gate_exps) + bytes(l.ffn_up_exps) + bytes(l.ffn_down_exps);
        if (hp_.n_expert > 0) n += experts * hp_.n_expert_used / hp_.n_expert;
    }
    return n;
}

std::string Model::describe() const {
    std::ostringstream os;
    os << hp_.arch << " " << human_count(n_params()) << " params, ";
    if (file_->has("general.file_type")) {
        os << ftype_name(file_->get_int("general.file_type"));
    } else {
        const GGMLType t = layers.empty()      ? tok_embd.type
                           : layers[0].wq.data ? layers[0].wq.type
                                               : layers[0].wqkv.type;
        os << type_name(t) << " weights";
    }
    os << ", " << hp_.n_layer << " layers, n_embd " << hp_.n_embd;
    if (hp_.n_expert > 0) os << ", " << hp_.n_expert << "x" << hp_.n_expert_used << " experts";
    int n_swa = 0;
    for (int il = 0; il < hp_.n_layer; ++il) n_swa += hp_.is_swa(il);
    if (n_swa > 0) os << ", sliding window " << hp_.n_swa << " on " << n_swa << " layers";
    return os.str();
}

}  // namespace specula
