// The Vulkan layer pass (see layers.h): per-session activation buffers, the device KV cache,
// the recorded programs, and the memory check made before anything is uploaded.
#include "vulkan/layers.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "common/error.h"
#include "kernels/matmul.h"
#include "vulkan/program.h"
#include "vulkan/weights.h"

namespace specula::vk {

namespace {

// Push-constant blocks, laid out as the shaders declare them.
struct MatvecPC {
    uint32_t rows, cols, ntok, in_off, ld_in, out_off, ld_out;
};
struct NormPC {
    uint32_t n, in_off, out_off;
    float eps;
};
struct RopePC {
    uint32_t head_dim, n_rot, neox, ld, cs_off;
};
struct StorePC {
    uint32_t width, layer_off;
};
struct AttnPC {
    uint32_t n_head, n_head_kv, head_dim, layer_off, ld_q, ld_kv;
    float scale;
    uint32_t window;
};
struct SplitPC {
    uint32_t n_head, n_head_kv, head_dim, layer_off, ld_q, ld_kv;
    float scale;
    uint32_t window, t0, ntok, seg, n_seg, ml_off;
};
struct CombinePC {
    uint32_t n_head, head_dim, ld_q, window, t0, seg, n_seg, ml_off;
};
struct AddPC {
    uint32_t width, y_off, ld_y, x_off, ld_x;
};
struct SiluPC {
    uint32_t n;
};

constexpr size_t kPassHeader = 16;  // pos0 and padding before the RoPE angles
constexpr size_t kMaxPrograms = 64;

// Split-K attention (attention_split.comp, then attention_combine.comp): the cache positions
// go in segments of this many, a constant (never the pass's size: batch invariance).
constexpr uint32_t kAttnSegment = 256;

// How a model's attention runs: the split shader for its head size, the tokens of one
// workgroup's query tile (its wg / lanes queries over g = n_head / n_head_kv heads; a pass
// runs in groups of that many tokens, each K/V row read once per group), the segments of the
// context and the partials' scratch for one group. Each group's split dispatch is indirect:
// forward() writes its workgroup counts (n_head_kv x the segments its queries see) into the
// pass buffer, for the global and the sliding-window layers. No shader (nullptr): attention.comp,
// one workgroup per (query head, token), where the device lacks the subgroup shuffles of heads over
// 64 or a KV head has more than a tile of query heads.
struct AttnShape {
    const char* shader = nullptr;  // + "_" + the workgroup size (64 .. wg)
    uint32_t lanes = 0, wg = 0, tokens = 0, n_seg = 0;
    size_t acc_floats = 0;  // the accumulators; m and l follow (2 per record)

    size_t scratch_floats(uint32_t head_dim) const {
        return acc_floats / head_dim * (head_dim + 2);
    }
};

AttnShape attn_shape(const HParams& hp, int n_ctx, const Context& ctx) {
    // Per head size (CMakeLists.txt's attention_split variants): the lanes of one query.
    const int hd = hp.head_dim;
    const int lanes = hd <= 16 ? 1 : hd <= 32 ? 2 : hd <= 64 ? 4 : 8;
    const int g = hp.n_head / hp.n_head_kv, wg = hd <= 64 ? 256 : 512;
    AttnShape a;
    if ((lanes > 1 && ctx.shuffle_lanes < static_cast<uint32_t>(lanes)) || g > wg / lanes) {
        return a;
    }
    a.shader = hd <= 16    ? "attention_split_16"
               : hd <= 32  ? "attention_split_32"
               : hd <= 64  ? "attention_split_64"
               : hd <= 128 ? "attention_split_128"
                           : "attention_split_256";
    a.lanes = static_cast<uint32_t>(lanes);
    a.wg = static_cast<uint32_t>(wg);
    a.tokens = static_cast<uint32_t>(wg / lanes / g);
    a.n_seg = static_cast<uint32_t>((n_ctx + kAttnSegment - 1) / kAttnSegment);
    a.acc_floats = size_t(a.tokens) * hp.n_head * a.n_seg * hd;
    return a;
}

uint32_t groups(uint64_t n, uint32_t per = 64) {
    return static_cast<uint32_t>((n + per - 1) / per);
}

// Workgroups of 64 over n elements in two dimensions (a dimension holds at most 65535; the
// elementwise shaders index (y * groups_x + x) * 64 + lane and skip what is past n).
std::pair<uint32_t, uint32_t> groups_2d(uint64_t n) {
    const uint64_t g = (n + 63) / 64, gx = std::min<uint64_t>(g, 65535);
    return {static_cast<uint32_t>(gx), static_cast<uint32_t>((g + gx - 1) / gx)};
}

// A recorded pass: device programs with, between program i and i + 1, a matrix the CPU runs
// (its input read back through `stage_in`, its result sent through `stage_out`).
struct Pass {
    std::vector<std::unique_ptr<Program>> programs;
    std::vector<const WeightView*> cpu;  // cpu[i] runs after programs[i]
    int ntok = 0;
};

class VulkanLayers final : public LayerOffload {
  public:
    VulkanLayers(const Model& m, std::shared_ptr<DeviceModel> d, int n_ctx)
        : hp_(m.hparams()),
          d_(std::move(d)),
          ctx_(d_->ctx),
          n_ctx_(n_ctx),
          attn_(attn_shape(hp_, n_ctx, *ctx_)) {
        const size_t kv = sizeof(float) * d_->layers.size() * n_ctx_ * hp_.n_embd_kv();
        kc_ = std::make_unique<Buffer>(ctx_, kv, Buffer::Kind::Device);
        vc_ = std::make_unique<Buffer>(ctx_, kv, Buffer::Kind::Device);
        if (attn_.shader) {
            part_ = std::make_unique<Buffer>(
                ctx_, sizeof(float) * attn_.scratch_floats(hp_.head_dim), Buffer::Kind::Device);
        }
    }

    int n_layers() const override { return static_cast<int>(d_->layers.size()); }
    bool has_output() const override { return d_->output.rows > 0; }

    void forward(float* x, const float* cs, const float* cs_swa, int ntok, int pos0, int n_out,
                 float* logits, ThreadPool& pool) override {
        reserve(ntok, n_out);
        auto* pass = static_cast<char*>(pass_->mapped());
        const int32_t p0 = pos0;
        std::memcpy(pass, &p0, sizeof p0);
        const size_t cs_bytes = sizeof(float) * ntok * hp_.n_rot;
        std::memcpy(pass + kPassHeader, cs, cs_bytes);
        if (cs_swa)
            std::memcpy(pass + kPassHeader + cs_swa_off() * sizeof(float), cs_swa, cs_bytes);
        swa_angles_ = cs_swa != nullptr;
        if (attn_.shader) write_attn_groups(pass + args_off(), ntok, pos0);
        std::memcpy(in_->mapped(), x, sizeof(float) * ntok * hp_.n_embd);
        const int key_out = has_output() ? n_out : 0;
        auto it = programs_.find({ntok, key_out});
        if (it == programs_.end()) {
            if (programs_.size() >= kMaxPrograms) programs_.clear();
            it = programs_.emplace(std::make_pair(ntok, key_out), record(ntok, n_out)).first;
        }
        run(*it->second, pool);
        if (has_output()) {
            std::memcpy(logits, out_->mapped(), sizeof(float) * n_out * hp_.n_vocab);
        } else {
            std::memcpy(x, out_->mapped(), sizeof(float) * ntok * hp_.n_embd);
        }
    }

  private:
    HParams hp_;
    std::shared_ptr<DeviceModel> d_;
    std::shared_ptr<Context> ctx_;
    int n_ctx_;
    AttnShape attn_;
    int cap_ = 0, cap_out_ = 0;               // the rows the buffers hold, the logits rows
    std::unique_ptr<Buffer> kc_, vc_, part_;  // part_: the split attention's partials
    std::unique_ptr<Buffer> in_, out_, pass_, x_, h_, q_, k_, v_, att_, tmp_, g_, u_, logits_;
    std::unique_ptr<Buffer> stage_in_, stage_out_;  // for the CPU's matrices (any_cpu only)
    std::map<std::pair<int, int>, std::unique_ptr<Pass>> programs_;
    MatmulScratch scratch_;
    bool swa_angles_ = false;  // the passes carry a second set of angles (for swa layers)

    // Where the sliding-window layers' angles start in the pass buffer's cs (in floats).
    uint32_t cs_swa_off() const { return static_cast<uint32_t>(cap_ * hp_.n_rot); }
    // The split attention's workgroup counts in the pass buffer: after the angles, 3 uint32_t
    // per token group, the global layers' groups, then the sliding-window layers'.
    size_t args_off() const { return kPassHeader + 2 * sizeof(float) * cap_ * hp_.n_rot; }
    uint32_t max_groups() const { return (cap_ + attn_.tokens - 1) / attn_.tokens; }
    size_t args_at(int window, uint32_t group) const {
        return args_off() + 12 * ((window > 0 ? max_groups() : 0) + group);
    }

    void write_attn_groups(char* args, int ntok, int pos0) const {
        const uint32_t n_groups = (ntok + attn_.tokens - 1) / attn_.tokens;
        for (int swa = 0; swa < 2; ++swa) {
            const uint32_t w = swa ? hp_.n_swa : 0;
            for (uint32_t i = 0; i < n_groups; ++i) {
                const uint32_t t0 = i * attn_.tokens;
                const uint32_t n = std::min<uint32_t>(attn_.tokens, ntok - t0);
                const uint32_t first_pos = pos0 + t0, last_pos = first_pos + n - 1;
                const uint32_t lo = w > 0 && first_pos + 1 > w ? first_pos + 1 - w : 0;
                const uint32_t xyz[3] = {static_cast<uint32_t>(hp_.n_head_kv),
                                         last_pos / kAttnSegment - lo / kAttnSegment + 1, 1};
                std::memcpy(args + 12 * ((swa ? max_groups() : 0) + i), xyz, sizeof xyz);
            }
        }
    }

    void run(const Pass& p, ThreadPool& pool) {
        for (size_t i = 0; i < p.programs.size(); ++i) {
            p.programs[i]->run();
            if (i < p.cpu.size()) {
                const WeightView& w = *p.cpu[i];
                matmul(w, static_cast<const float*>(stage_in_->mapped()), w.cols, p.ntok,
                       static_cast<float*>(stage_out_->mapped()), w.rows, pool, scratch_);
            }
        }
    }

    // Activation buffers for `ntok` tokens, logits for `n_out` of them (a prompt's pass keeps
    // one row, not one per token); growing drops the programs that point at the old ones.
    void reserve(int ntok, int n_out) {
        if (ntok <= cap_ && n_out <= cap_out_) return;
        programs_.clear();
        int cap = std::max(cap_, 16);
        while (cap < ntok) cap *= 2;
        cap_ = cap;
        int cap_out = std::max(cap_out_, 16);
        while (cap_out < n_out) cap_out *= 2;
        cap_out_ = std::min(cap_out, cap);
        const size_t n = cap, f = sizeof(float);
        auto dev = [&](size_t floats) {
            return std::make_unique<Buffer>(ctx_, floats * f, Buffer::Kind::Device);
        };
        auto host = [&](size_t bytes) {
            return std::make_unique<Buffer>(ctx_, bytes, Buffer::Kind::Host);
        };
        const size_t out_floats = has_output() ? size_t(cap_out_) * hp_.n_vocab : n * hp_.n_embd;
        in_ = host(n * hp_.n_embd * f);
        out_ = host(out_floats * f);
        // pos0, the angles, the swa layers' angles, the split attention's workgroup counts
        pass_ = host(args_off() + (attn_.shader ? 24 * size_t(max_groups()) : 0));
        x_ = dev(n * hp_.n_embd);
        h_ = dev(n * hp_.n_embd);
        tmp_ = dev(n * hp_.n_embd);
        q_ = dev(n * hp_.n_embd_q());
        att_ = dev(n * hp_.n_embd_q());
        k_ = dev(n * hp_.n_embd_kv());
        v_ = dev(n * hp_.n_embd_kv());
        g_ = dev(n * hp_.n_ff);
        u_ = dev(n * hp_.n_ff);
        logits_ = has_output() ? dev(size_t(cap_out_) * hp_.n_vocab) : nullptr;
        if (d_->any_cpu) {
            const size_t w = std::max({size_t(hp_.n_embd), size_t(hp_.n_ff), size_t(hp_.n_embd_q()),
                                       size_t(hp_.n_embd_kv())});
            stage_in_ = host(n * w * f);
            stage_out_ = host(n * w * f);
        }
    }

    const Pipeline& pipe(const char* name, int n_bindings, uint32_t push_bytes) {
        return d_->pipelines.get(name, n_bindings, push_bytes);
    }

    // y = W x for ntok rows of x at in_off (row stride w.cols) into out (row stride w.rows): on
    // the device, or for a matrix the device cannot run, on the CPU between two programs.
    void matvec(Pass& ps, const DeviceMatrix& w, const Buffer& in, uint32_t in_off,
                const Buffer& out, int ntok) {
        if (w.cpu) {
            const size_t f = sizeof(float);
            ps.programs.back()->copy(in, f * in_off, *stage_in_, 0, f * ntok * w.cols);
            ps.programs.back()->finish();
            ps.cpu.push_back(w.cpu);
            ps.programs.push_back(std::make_unique<Program>(ctx_));
            ps.programs.back()->copy(*stage_out_, 0, out, 0, f * ntok * w.rows);
            return;
        }
        const MatvecPC pc{w.rows, w.cols, static_cast<uint32_t>(ntok), in_off, w.cols, 0, w.rows};
        ps.programs.back()->dispatch(pipe(matvec_shader(w.type), 3, sizeof pc),
                                     {w.buf.get(), &in, &out}, &pc,
                                     groups(w.rows, 4));  // matvec.comp: 4 rows per workgroup
    }

    void norm(Program& p, const Buffer& in, uint32_t in_off, const Buffer& w, const Buffer& out,
              int ntok) {
        const NormPC pc{static_cast<uint32_t>(hp_.n_embd), in_off, 0, hp_.rms_eps};
        p.dispatch(pipe("rms_norm", 3, sizeof pc), {&in, &w, &out}, &pc, ntok);
    }

    // x = rms_norm(x) * w per head in place: ntok rows of n_heads heads of head_dim (qwen3,
    // gemma3's Q/K norm).
    void head_norm(Program& p, const Buffer& x, const Buffer& w, int n_heads, int ntok) {
        const NormPC pc{static_cast<uint32_t>(hp_.head_dim), 0, 0, hp_.rms_eps};
        p.dispatch(pipe("rms_norm", 3, sizeof pc), {&x, &w, &x}, &pc, n_heads, ntok);
    }

    // x += rms_norm(y) * w (gemma's post-attention and post-FFN norms; y is clobbered).
    void add_post_normed(Program& p, const Buffer& x, const Buffer& y, const Buffer* w, int ntok) {
        const uint32_t ne = hp_.n_embd;
        if (w) {
            norm(p, y, 0, *w, *h_, ntok);
            add(p, x, *h_, ne, ne, ntok);
        } else {
            add(p, x, y, ne, ne, ntok);
        }
    }

    void add(Program& p, const Buffer& y, const Buffer& x, uint32_t width, uint32_t ld_x,
             int ntok) {
        const AddPC pc{width, 0, width, 0, ld_x};
        p.dispatch(pipe("add", 2, sizeof pc), {&y, &x}, &pc, groups(width), ntok);
    }

    void bias(Program& p, const Buffer& y, const Buffer* b, uint32_t width, int ntok) {
        if (b) add(p, y, *b, width, 0, ntok);
    }

    void rope(Program& p, const Buffer& x, int n_heads, uint32_t ld, int ntok, bool swa) {
        const RopePC pc{static_cast<uint32_t>(hp_.head_dim), static_cast<uint32_t>(hp_.n_rot),
                        hp_.rope_neox ? 1u : 0u, ld, swa ? cs_swa_off() : 0u};
        p.dispatch(pipe("rope", 2, sizeof pc), {&x, pass_.get()}, &pc, n_heads, ntok);
    }

    // att = softmax(q k^T scale) v over the layer's cache rows each query sees: split-K in
    // groups of attn_.tokens tokens (one split and one combine dispatch each), else attention.comp.
    void attention(Program& p, uint32_t layer_off, int window, int ntok) {
        const uint32_t nh = hp_.n_head, nkv = hp_.n_head_kv, hd = hp_.head_dim;
        const uint32_t dq = hp_.n_embd_q(), dkv = hp_.n_embd_kv(), w = window;
        const float scale =
            hp_.attn_scale > 0 ? hp_.attn_scale : 1.0f / std::sqrt(static_cast<float>(hd));
        if (!attn_.shader) {
            const AttnPC at{nh, nkv, hd, layer_off, dq, dkv, scale, w};
            p.dispatch(pipe("attention", 5, sizeof at),
                       {q_.get(), kc_.get(), vc_.get(), att_.get(), pass_.get()}, &at, nh, ntok);
            return;
        }
        const uint32_t ml_off = static_cast<uint32_t>(attn_.acc_floats);
        for (uint32_t t0 = 0; t0 < static_cast<uint32_t>(ntok); t0 += attn_.tokens) {
            const uint32_t n = std::min<uint32_t>(attn_.tokens, ntok - t0);
            // The smallest workgroup that holds the group's queries (a query's arithmetic is the
            // same in each: what it computes never depends on the workgroup).
            uint32_t wg = 64;
            while (wg < n * (nh / nkv) * attn_.lanes) wg *= 2;
            const std::string shader = std::string(attn_.shader) + "_" + std::to_string(wg);
            const SplitPC sp{nh, nkv, hd, layer_off,    dq,          dkv,   scale,
                             w,  t0,  n,  kAttnSegment, attn_.n_seg, ml_off};
            p.dispatch_indirect(pipe(shader.c_str(), 5, sizeof sp),
                                {q_.get(), kc_.get(), vc_.get(), part_.get(), pass_.get()}, &sp,
                                *pass_, args_at(window, t0 / attn_.tokens));
            const CombinePC cp{nh, hd, dq, w, t0, kAttnSegment, attn_.n_seg, ml_off};
            p.dispatch(pipe("attention_combine", 3, sizeof cp),
                       {part_.get(), att_.get(), pass_.get()}, &cp, nh, n);
        }
    }

    void layer(Pass& ps, const DeviceLayer& l, int il, int ntok) {
        const uint32_t dq = hp_.n_embd_q(), dkv = hp_.n_embd_kv(), ne = hp_.n_embd;
        const uint32_t layer_off = static_cast<uint32_t>(il) * n_ctx_ * dkv;
        auto p = [&]() -> Program& { return *ps.programs.back(); };  // after any CPU matrix
        norm(p(), *x_, 0, *l.attn_norm, *h_, ntok);
        matvec(ps, l.wq, *h_, 0, *q_, ntok);
        matvec(ps, l.wk, *h_, 0, *k_, ntok);
        matvec(ps, l.wv, *h_, 0, *v_, ntok);
        bias(p(), *q_, l.bq.get(), dq, ntok);
        bias(p(), *k_, l.bk.get(), dkv, ntok);
        bias(p(), *v_, l.bv.get(), dkv, ntok);
        if (l.q_norm) head_norm(p(), *q_, *l.q_norm, hp_.n_head, ntok);
        if (l.k_norm) head_norm(p(), *k_, *l.k_norm, hp_.n_head_kv, ntok);
        const bool swa_rope = swa_angles_ && hp_.is_swa(il);
        rope(p(), *q_, hp_.n_head, dq, ntok, swa_rope);
        rope(p(), *k_, hp_.n_head_kv, dkv, ntok, swa_rope);
        const StorePC st{dkv, layer_off};
        p().dispatch(pipe("kv_store", 5, sizeof st),
                     {k_.get(), v_.get(), kc_.get(), vc_.get(), pass_.get()}, &st, groups(dkv),
                     ntok);
        attention(p(), layer_off, hp_.window(il), ntok);
        matvec(ps, l.wo, *att_, 0, *tmp_, ntok);
        bias(p(), *tmp_, l.bo.get(), ne, ntok);
        add_post_normed(p(), *x_, *tmp_, l.attn_post_norm.get(), ntok);
        norm(p(), *x_, 0, *l.ffn_norm, *h_, ntok);
        matvec(ps, l.ffn_gate, *h_, 0, *g_, ntok);
        matvec(ps, l.ffn_up, *h_, 0, *u_, ntok);
        const SiluPC sp{static_cast<uint32_t>(ntok * hp_.n_ff)};
        const auto [gx, gy] = groups_2d(sp.n);
        const bool gelu = hp_.ffn_act == HParams::FfnAct::GeluTanh;
        p().dispatch(pipe(gelu ? "gelu_mul" : "silu_mul", 2, sizeof sp), {g_.get(), u_.get()}, &sp,
                     gx, gy);
        matvec(ps, l.ffn_down, *g_, 0, *tmp_, ntok);
        add_post_normed(p(), *x_, *tmp_, l.ffn_post_norm.get(), ntok);
    }

    std::unique_ptr<Pass> record(int ntok, int n_out) {
        auto ps = std::make_unique<Pass>();
        ps->ntok = ntok;
        ps->programs.push_back(std::make_unique<Program>(ctx_));
        const size_t f = sizeof(float);
        ps->programs.back()->copy(*in_, 0, *x_, 0, f * ntok * hp_.n_embd);
        for (int il = 0; il < n_layers(); ++il) layer(*ps, d_->layers[il], il, ntok);
        Program& p = *ps->programs.back();
        if (has_output()) {
            norm(p, *x_, static_cast<uint32_t>((ntok - n_out) * hp_.n_embd), *d_->output_norm, *h_,
                 n_out);
            matvec(*ps, d_->output, *h_, 0, *logits_, n_out);  // on the device (has_output)
            p.copy(*logits_, 0, *out_, 0, f * n_out * hp_.n_vocab);
        } else {
            p.copy(*x_, 0, *out_, 0, f * ntok * hp_.n_embd);
        }
        p.finish();
        return ps;
    }
};

void say_once(const std::string& line) {
    static std::mutex mu;
    static std::map<std::string, bool> said;
    std::lock_guard<std::mutex> lock(mu);
    if (said[line]) return;
    said[line] = true;
    std::fprintf(stderr, "specula: %s\n", line.c_str());
}

}  // namespace

OffloadPlan plan_vulkan(const Model& m, const OffloadParams& p) {
    OffloadPlan plan;
    if (p.n_gpu_layers <= 0) return plan;
    if (p.device < 0 && list_devices().empty()) {
        plan.note = "no Vulkan device found: running on the CPU";
        return plan;
    }
    std::shared_ptr<Context> ctx = open_context(p.device);
    plan.device = ctx->info.index;
    plan.device_name = ctx->info.name;
    plan.device_bytes = static_cast<double>(ctx->info.local_bytes);
    plan.n_layers = plan_layers(m, p.n_gpu_layers, &plan.output, &plan.note);
    if (plan.n_layers == 0) return plan;
    plan.weight_bytes = static_cast<double>(plan_bytes(m, plan.n_layers, plan.output));
    plan.kv_bytes = 2.0 * sizeof(float) * plan.n_layers * p.n_ctx * m.hparams().n_embd_kv();
    // With the split attention's partials (one scratch, whatever the number of layers).
    const HParams& hp = m.hparams();
    plan.kv_bytes +=
        sizeof(float) * double(attn_shape(hp, p.n_ctx, *ctx).scratch_floats(hp.head_dim));
    return plan;
}

std::unique_ptr<LayerOffload> make_vulkan_layers(const Model& m, const OffloadParams& p) {
    const OffloadPlan plan = plan_vulkan(m, p);
    if (!plan.note.empty()) say_once(plan.note);
    if (plan.n_layers == 0) return nullptr;
    const HParams& hp = m.hparams();
    const double mib = 1 << 20;
    if (plan.device_bytes > 0 && plan.weight_bytes + plan.kv_bytes > plan.device_bytes) {
        fail("the ", plan.n_layers, " offloaded layers need ", plan.weight_bytes / mib,
             " MiB of weights + ", plan.kv_bytes / mib, " MiB of KV cache (n_ctx = ", p.n_ctx,
             "), more than the ", plan.device_bytes / mib, " MiB of Vulkan", plan.device, " '",
             plan.device_name,
             "': offload fewer layers (-ngl, or -ngld for the draft) or lower the context (-c)");
    }
    say_once("offloading " + std::to_string(plan.n_layers) + "/" + std::to_string(hp.n_layer) +
             " layers" + (plan.output ? " and the output head" : "") + " to Vulkan device " +
             std::to_string(plan.device) + " (" + plan.device_name + ")");
    return std::make_unique<VulkanLayers>(
        m, device_model(m, open_context(p.device), plan.n_layers, plan.output), p.n_ctx);
}

}  // namespace specula::vk
