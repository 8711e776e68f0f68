// llama-quantize's file types and per-tensor type rules (quantize/type_mix.h), for the types
// `specula quantize` writes. Only the rules that can fire for those types are here; llama.cpp's
// others concern the 1-3 bit types.
#include "quantize/type_mix.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "common/error.h"

namespace specula::quant {

namespace {

// LLAMA_FTYPE_MOSTLY_* numbers.
enum : uint32_t {
    kF32 = 0,
    kF16 = 1,
    kQ4_0 = 2,
    kQ4_1 = 3,
    kQ8_0 = 7,
    kQ5_0 = 8,
    kQ5_1 = 9,
    kQ4_K_S = 14,
    kQ4_K_M = 15,
    kQ5_K_S = 16,
    kQ5_K_M = 17,
    kQ6_K = 18,
    kIQ4_NL = 25,
    kIQ4_XS = 30,
    kBF16 = 32,
};

bool contains(const std::string& s, const char* part) {
    return s.find(part) != std::string::npos;
}

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third between.
bool more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

bool is_quantized(GGMLType t) {
    return type_traits(t).block_size > 1;
}

GGMLType output_rule(const FileType& ft, const MixModel& m, int64_t ne0, GGMLType t,
                     const MixOptions& opt) {
    if (opt.output_type) return *opt.output_type;
    if (m.arch == "falcon" || ne0 % type_traits(t).block_size != 0) return GGMLType::Q8_0;
    (void)ft;
    return t != GGMLType::Q8_0 ? GGMLType::Q6_K : t;
}

GGMLType attn_v_rule(const FileType& ft, const MixModel& m, MixState& st, GGMLType t) {
    const uint32_t f = ft.ftype;
    if ((f == kIQ4_NL || f == kIQ4_XS) && m.n_gqa >= 4) {
        t = GGMLType::Q5_K;
    } else if ((f == kQ4_K_M || f == kQ5_K_M) && more_bits(st.i_attention_wv, m.n_attention_wv)) {
        t = GGMLType::Q6_K;
    } else if (f == kQ4_K_S && st.i_attention_wv < 4) {
        t = GGMLType::Q5_K;
    }
    // llama.cpp's LLM_TYPE_70B (a llama with 80 layers and grouped KV heads).
    if (m.arch == "llama" && m.n_layer == 80 && m.n_gqa > 1 && t == GGMLType::Q4_K) {
        t = GGMLType::Q5_K;
    }
    if (m.n_expert == 8) t = GGMLType::Q8_0;
    ++st.i_attention_wv;
    return t;
}

// The layer an ffn_down tensor belongs to: its visit count, or for an MoE model its name's.
int ffn_layer(const MixModel& m, const MixState& st, const std::string& name) {
    if (m.n_expert <= 1) return st.i_ffn_down;
    int layer = -1;
    if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1 || layer < 0 || layer >= m.n_layer) {
        fail("tensor ", name, ": no layer number below the block count ", m.n_layer);
    }
    return layer;
}

GGMLType ffn_down_rule(const FileType& ft, const MixModel& m, MixState& st, const std::string& name,
                       GGMLType t) {
    const uint32_t f = ft.ftype;
    const int i = ffn_layer(m, st, name), n = m.n_layer;
    const bool falcon = m.arch == "falcon";
    if (f == kQ4_K_M) {
        if (falcon) {
            t = i < n / 16 ? GGMLType::Q6_K : more_bits(i, n) ? GGMLType::Q5_K : GGMLType::Q4_K;
        } else if (more_bits(i, n)) {
            t = GGMLType::Q6_K;
        }
    } else if (i < n / 8 && (f == kIQ4_NL || f == kIQ4_XS)) {
        t = GGMLType::Q5_K;
    } else if (f == kQ5_K_M && more_bits(i, n)) {
        t = GGMLType::Q6_K;
    } else if (f == kQ4_K_S && !falcon && i < n / 8) {
        t = GGMLType::Q5_K;
    }
    ++st.i_ffn_down;
    return t;
}

GGMLType attn_output_rule(const FileType& ft, const MixModel& m, GGMLType t) {
    const uint32_t f = ft.ftype;
    if (m.arch != "falcon" && m.n_expert == 8 &&
        (f == kIQ4_NL || f == kQ4_K_S || f == kQ4_K_M || f == kIQ4_XS)) {
        return GGMLType::Q5_K;
    }
    return t;
}

// The rules by tensor name, in llama.cpp's order (the first that matches decides).
GGMLType mixed_type(const FileType& ft, const MixModel& m, MixState& st, const std::string& name,
                    int64_t ne0, const MixOptions& opt) {
    const GGMLType t = ft.base;
    if (name == "output.weight" || (!m.has_output && name == "token_embd.weight")) {
        return output_rule(ft, m, ne0, t, opt);
    }
    if (name == "token_embd.weight") return opt.token_embd_type.value_or(t);
    if (contains(name, "attn_v.weight")) return attn_v_rule(ft, m, st, t);
    if (contains(name, "attn_k.weight")) return m.n_expert == 8 ? GGMLType::Q8_0 : t;
    if (contains(name, "attn_q.weight")) return t;
    if (contains(name, "ffn_down")) return ffn_down_rule(ft, m, st, name, t);
    if (contains(name, "attn_output.weight")) return attn_output_rule(ft, m, t);
    if (contains(name, "attn_qkv.weight")) {
        if (ft.ftype == kQ4_K_M) return GGMLType::Q5_K;
        if (ft.ftype == kQ5_K_M) return GGMLType::Q6_K;
    }
    return t;
}

// llama-quantize's fallback for a row length the chosen type's block does not divide.
GGMLType fallback(GGMLType t, int64_t ne0, const std::string& name) {
    GGMLType f;
    switch (t) {
        case GGMLType::IQ4_XS:
            f = GGMLType::IQ4_NL;
            break;
        case GGMLType::Q4_K:
            f = GGMLType::Q5_0;
            break;
        case GGMLType::Q5_K:
            f = GGMLType::Q5_1;
            break;
        case GGMLType::Q6_K:
            f = GGMLType::Q8_0;
            break;
        default:
            fail("tensor ", name, ": rows of ", ne0, " elements do not fit ", type_name(t),
                 " blocks of ", type_traits(t).block_size);
    }
    return ne0 % type_traits(f).block_size == 0 ? f : GGMLType::F16;
}

}  // namespace

const std::vector<FileType>& file_types() {
    static const std::vector<FileType> kTypes = {
        {"Q4_0", kQ4_0, GGMLType::Q4_0},       {"Q4_1", kQ4_1, GGMLType::Q4_1},
        {"Q5_0", kQ5_0, GGMLType::Q5_0},       {"Q5_1", kQ5_1, GGMLType::Q5_1},
        {"IQ4_NL", kIQ4_NL, GGMLType::IQ4_NL}, {"IQ4_XS", kIQ4_XS, GGMLType::IQ4_XS},
        {"Q4_K_S", kQ4_K_S, GGMLType::Q4_K},   {"Q4_K_M", kQ4_K_M, GGMLType::Q4_K},
        {"Q5_K_S", kQ5_K_S, GGMLType::Q5_K},   {"Q5_K_M", kQ5_K_M, GGMLType::Q5_K},
        {"Q6_K", kQ6_K, GGMLType::Q6_K},       {"Q8_0", kQ8_0, GGMLType::Q8_0},
        {"F16", kF16, GGMLType::F16},          {"BF16", kBF16, GGMLType::BF16},
        {"F32", kF32, GGMLType::F32},
    };
    return kTypes;
}

std::optional<FileType> find_file_type(std::string_view name) {
    std::string up(name);
    for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const bool number = !up.empty() && std::all_of(up.begin(), up.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
    });
    for (const FileType& ft : file_types()) {
        if (ft.name == up) return ft;
        if (number && up.size() < 4 && std::to_string(ft.ftype) == up) return ft;
    }
    return std::nullopt;
}

bool is_quantizable(const std::string& name, int n_dims, const MixOptions& opt) {
    const auto ends_with = [&](std::string_view s) {
        return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    if (!ends_with("weight") || n_dims < 2) return false;
    if (contains(name, "_norm.weight") || contains(name, "ffn_gate_inp.weight")) return false;
    if (opt.leave_output && name == "output.weight") return false;
    static const char* const kKept[] = {"position_embd.weight", "token_types.weight"};
    for (const char* k : kKept)
        if (name == k) return false;
    static const char* const kKeptParts[] = {
        "ssm_conv1d.weight",          "time_mix_first.weight",    "time_mix_w1.weight",
        "time_mix_w2.weight",         "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
        "time_mix_lerp_fused.weight", "attn_rel_b.weight"};
    for (const char* k : kKeptParts)
        if (contains(name, k)) return false;
    return true;
}

GGMLType tensor_type(const FileType& ft, const MixModel& m, MixState& st, const std::string& name,
                     int64_t ne0, const MixOptions& opt, int* n_fallback) {
    GGMLType t = ft.base;
    if (!opt.pure && is_quantized(ft.base)) {
        t = mixed_type(ft, m, st, name, ne0, opt);
        if (ne0 % type_traits(t).block_size != 0) {
            t = fallback(t, ne0, name);
            if (n_fallback) ++*n_fallback;
        }
    }
    if (opt.token_embd_type && name == "token_embd.weight") t = *opt.token_embd_type;
    if (opt.output_type && name == "output.weight") t = *opt.output_type;
    if (ne0 % type_traits(t).block_size != 0) {
        fail("tensor ", name, ": rows of ", ne0, " elements do not fit ", type_name(t),
             " blocks of ", type_traits(t).block_size);
    }
    return t;
}

}  // namespace specula::quant
