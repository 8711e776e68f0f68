// Weight planning and upload (see weights.h).
#include "vulkan/weights.h"

#include <map>
#include <tuple>

#include "common/error.h"
#include "model/load/arch.h"

namespace specula::vk {

const char* matvec_shader(GGMLType t) {
    switch (t) {
        case GGMLType::F32:
            return "matvec_f32";
        case GGMLType::F16:
            return "matvec_f16";
        case GGMLType::BF16:
            return "matvec_bf16";
        case GGMLType::Q8_0:
            return "matvec_q8_0";
        case GGMLType::Q4_0:
            return "matvec_q4_0";
        case GGMLType::Q4_K:
            return "matvec_q4_k";
        case GGMLType::Q5_K:
            return "matvec_q5_k";
        case GGMLType::Q6_K:
            return "matvec_q6_k";
        default:
            return nullptr;
    }
}

namespace {

// Shaders take 32-element units of a row (plain types: the last one may be short, F16/BF16 rows
// start on a 32-bit word) and 32-bit indices.
bool matrix_ok(const WeightView& w) {
    const bool plain =
        w.type == GGMLType::F32 || w.type == GGMLType::F16 || w.type == GGMLType::BF16;
    const bool shape = plain ? w.type == GGMLType::F32 || w.cols % 2 == 0 : w.cols % 32 == 0;
    return matvec_shader(w.type) && shape &&
           static_cast<double>(w.row_bytes()) * w.rows < 4.0 * (1ull << 30);
}

const char* tensor_name(const LayerWeights& l, const WeightView* w) {
    if (w == &l.wq) return "attn_q";
    if (w == &l.wk) return "attn_k";
    if (w == &l.wv) return "attn_v";
    if (w == &l.wo) return "attn_output";
    if (w == &l.ffn_gate) return "ffn_gate";
    if (w == &l.ffn_up) return "ffn_up";
    return "ffn_down";
}

size_t matrix_bytes(const WeightView& w) {
    return w.row_bytes() * static_cast<size_t>(w.rows);
}

}  // namespace

int plan_layers(const Model& m, int want, bool* output, std::string* note) {
    const HParams& hp = m.hparams();
    *output = false;
    if (!m.arch().device_block) {
        *note = "architecture " + hp.arch + " has no Vulkan layers yet: running on the CPU";
        return 0;
    }
    if (hp.rope_yarn) {
        *note = "YaRN rope scaling has no Vulkan shader yet: running on the CPU";
        return 0;
    }
    if (hp.attn_softcap > 0 || hp.final_softcap > 0) {
        *note = "soft-capping (gemma2) has no Vulkan shader yet: running on the CPU";
        return 0;
    }
    if (hp.n_expert > 0) {
        *note = "mixture-of-experts layers have no Vulkan shaders yet";
        return 0;
    }
    if (hp.head_dim > 256 || hp.n_rot > hp.head_dim) {
        *note = "head size " + std::to_string(hp.head_dim) + " is over the Vulkan limit of 256";
        return 0;
    }
    const int n = std::min(want, hp.n_layer);
    std::string cpu;
    int n_cpu = 0;
    for (int il = 0; il < n; ++il) {
        const LayerWeights& l = m.layers[il];
        for (const WeightView* w :
             {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down}) {
            if (matrix_ok(*w)) continue;
            if (++n_cpu <= 4) {
                cpu += std::string(cpu.empty() ? "" : ", ") + "blk." + std::to_string(il) + "." +
                       tensor_name(l, w) + " (" + std::string(type_name(w->type)) + ")";
            }
        }
    }
    if (n_cpu > 4) cpu += " and " + std::to_string(n_cpu - 4) + " more";
    if (n_cpu > 0) {
        *note = cpu + (n_cpu == 1 ? " has" : " have") +
                " no Vulkan shader: run on the CPU, the rest of their layers on the device";
    }
    if (n == hp.n_layer) {
        *output = matrix_ok(m.output);
        if (!*output) {
            if (!note->empty()) *note += "; ";
            *note += "the output head is " + std::string(type_name(m.output.type)) +
                     ", which has no Vulkan shader: it runs on the CPU";
        }
    }
    return n;
}

size_t plan_bytes(const Model& m, int n_layers, bool output) {
    const HParams& hp = m.hparams();
    size_t b = 0;
    for (int il = 0; il < n_layers; ++il) {
        const LayerWeights& l = m.layers[il];
        for (const WeightView* w :
             {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down}) {
            if (matrix_ok(*w)) b += matrix_bytes(*w);
        }
        b += sizeof(float) * (2 * hp.n_embd + hp.n_embd_q() + 2 * hp.n_embd_kv() + hp.n_embd);
        b += sizeof(float) *
             ((l.q_norm ? hp.head_dim : 0) + (l.k_norm ? hp.head_dim : 0) +
              (l.attn_post_norm ? hp.n_embd : 0) + (l.ffn_post_norm ? hp.n_embd : 0));
    }
    if (output) b += matrix_bytes(m.output) + sizeof(float) * hp.n_embd;
    return b;
}

namespace {

std::unique_ptr<Buffer> vec(DeviceModel& d, const float* v, int64_t n) {
    if (!v) return nullptr;
    auto b = std::make_unique<Buffer>(d.ctx, sizeof(float) * n, Buffer::Kind::Device);
    b->upload(v, sizeof(float) * n);
    d.bytes += sizeof(float) * n;
    return b;
}

DeviceMatrix mat(DeviceModel& d, const WeightView& w) {
    DeviceMatrix m;
    m.type = w.type;
    m.rows = static_cast<uint32_t>(w.rows);
    m.cols = static_cast<uint32_t>(w.cols);
    if (!matrix_ok(w)) {
        m.cpu = &w;
        d.any_cpu = true;
        return m;
    }
    const size_t bytes = matrix_bytes(w);
    // Shaders read whole 32-bit words: round up so the last word is inside the buffer.
    m.buf = std::make_unique<Buffer>(d.ctx, (bytes + 3) / 4 * 4, Buffer::Kind::Device);
    m.buf->upload(w.data, bytes);
    d.bytes += bytes;
    return m;
}

std::shared_ptr<DeviceModel> upload(const Model& m, const std::shared_ptr<Context>& ctx,
                                    int n_layers, bool output) {
    const HParams& hp = m.hparams();
    auto d = std::make_shared<DeviceModel>(ctx);
    for (int il = 0; il < n_layers; ++il) {
        const LayerWeights& l = m.layers[il];
        DeviceLayer& dl = d->layers.emplace_back();
        dl.attn_norm = vec(*d, l.attn_norm, hp.n_embd);
        dl.ffn_norm = vec(*d, l.ffn_norm, hp.n_embd);
        dl.bq = vec(*d, l.bq, hp.n_embd_q());
        dl.bk = vec(*d, l.bk, hp.n_embd_kv());
        dl.bv = vec(*d, l.bv, hp.n_embd_kv());
        dl.bo = vec(*d, l.bo, hp.n_embd);
        dl.q_norm = vec(*d, l.q_norm, hp.head_dim);
        dl.k_norm = vec(*d, l.k_norm, hp.head_dim);
        dl.attn_post_norm = vec(*d, l.attn_post_norm, hp.n_embd);
        dl.ffn_post_norm = vec(*d, l.ffn_post_norm, hp.n_embd);
        dl.wq = mat(*d, l.wq);
        dl.wk = mat(*d, l.wk);
        dl.wv = mat(*d, l.wv);
        dl.wo = mat(*d, l.wo);
        dl.ffn_gate = mat(*d, l.ffn_gate);
        dl.ffn_up = mat(*d, l.ffn_up);
        dl.ffn_down = mat(*d, l.ffn_down);
    }
    if (output) {
        d->output_norm = vec(*d, m.output_norm, hp.n_embd);
        d->output = mat(*d, m.output);
    }
    return d;
}

}  // namespace

std::shared_ptr<DeviceModel> device_model(const Model& m, const std::shared_ptr<Context>& ctx,
                                          int n_layers, bool output) {
    using Key = std::tuple<const Model*, const Context*, int, bool>;
    static std::mutex mu;
    static std::map<Key, std::weak_ptr<DeviceModel>> cache;
    std::lock_guard<std::mutex> lock(mu);
    const Key key{&m, ctx.get(), n_layers, output};
    if (auto d = cache[key].lock()) return d;
    auto d = upload(m, ctx, n_layers, output);
    cache[key] = d;
    return d;
}

}  // namespace specula::vk
