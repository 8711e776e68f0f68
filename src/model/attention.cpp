// Attention over the KV cache (see attention.h).
#include "model/attention.h"

#include <cstring>

#include "kernels/dispatch.h"
#include "model/attention_kernels.h"
#include "model/ops.h"

namespace specula {

namespace {

constexpr int64_t kMinParallelFlops = 1 << 16;

// One query head of one token: softmax(q . K^T * scale) . V over positions [0, n_kv).
void attend_head(const AttentionKernels& kern, const KVCache& kv, int layer, int n_kv, int kv_off,
                 const float* q, float* out, const AttentionShape& s, float* scores) {
    const int hd = s.head_dim;
    for (int j = 0; j < n_kv; ++j) scores[j] = kern.dot(q, kv.k(layer, j) + kv_off, hd) * s.scale;
    softmax(scores, n_kv);
    std::memset(out, 0, sizeof(float) * hd);
    for (int j = 0; j < n_kv; ++j) kern.axpy(scores[j], kv.v(layer, j) + kv_off, out, hd);
}

}  // namespace

const AttentionKernels& attention_kernels() {
    static const AttentionKernels k = active_simd_level() >= SimdLevel::AVX2
                                          ? AttentionKernels{dot_f32_avx2, axpy_avx2}
                                          : AttentionKernels{dot_f32, axpy};
    return k;
}

void attention(const KVCache& kv, int layer, int pos0, int ntok, const float* q, float* out,
               const AttentionShape& s, ThreadPool& pool, float* scores) {
    const int group = s.n_head / s.n_head_kv;
    const int64_t ldq = static_cast<int64_t>(s.n_head) * s.head_dim;
    const int64_t n_pairs = static_cast<int64_t>(ntok) * s.n_head;
    const AttentionKernels& kern = attention_kernels();
    auto work = [&](int ith, int nth) {
        float* sc = scores + static_cast<int64_t>(ith) * kv.n_ctx();
        for (int64_t i = ith; i < n_pairs; i += nth) {
            const int t = static_cast<int>(i / s.n_head), h = static_cast<int>(i % s.n_head);
            const int64_t off = t * ldq + static_cast<int64_t>(h) * s.head_dim;
            attend_head(kern, kv, layer, pos0 + t + 1, (h / group) * s.head_dim, q + off, out + off,
                        s, sc);
        }
    };
    // Waking the workers costs more than a few thousand multiply-adds: small jobs run inline.
    // Each pair is computed the same way either way, so this choice never changes results.
    const int64_t flops = n_pairs * (pos0 + ntok) * s.head_dim * 2;
    if (pool.size() == 1 || flops < kMinParallelFlops) {
        work(0, 1);
    } else {
        pool.run(work);
    }
}

}  // namespace specula
