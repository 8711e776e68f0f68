// The attention kernels the table holds (kernels/table.h's AttentionEntry: q.k dot products, the
// weighted sum of V rows, the KV cache's row conversions, and these blocked kernels), for
// model/blocks/attention.cpp's attention block. Every ISA's kernels use a fixed summation order, so
// a process's results never depend on the batch.
#pragma once

#include <cstddef>
#include <cstdint>

namespace specula {

// One block of 32 query values rounded to Q8_0 for the dot products with a Q8_0 key cache (as
// llama.cpp rounds Q to the key's dot type): the F16 scale widened, the sum of the int8 values and
// the values. A query of head_dim values is head_dim / 32 of them.
// Rows per block of a transposed key side (BlockAttentionKernels::qk_t, model/state/kv_cache.h).
constexpr int kKeyBlock = 16;

struct KeyQueryQ8 {
    float d;
    int32_t sum;
    int8_t qs[32];
};

// Blocked attention: many queries (positions, and the query heads of one KV head) against the
// same K / V rows, each row loaded once per block. K and V rows are `stride` floats apart; hd is
// the head size the kernels were chosen for (the templated ones know it already, the run-time
// ones for wide heads read it).
//   qk: s[i][j] = scale * dot(q[i], K row j) for j in [j0, j1), i < nq
//   pv: out[i] += sum of p[i][j] * V row j over j in [j0, j1) in order, i < nq
// A query's results do not depend on nq or on how [0, n) is split into [j0, j1) ranges.
// AttentionEntry::blocked(head_dim, &k) fills them for head_dim (AVX-512: a multiple of 16; AVX2:
// of 8; up to 256 (Gemma 3 and Qwen3.5 have heads of 256) by kernels compiled for each size, wider
// ones up to 2048 (Gemma 4's global heads of 512, MLA's latent rows of 576) by kernels that loop
// over the head at run time, with the same summation order) and returns false for other sizes;
// kernels/table.h's best_blocked_attention takes the first ISA that covers a size.
struct BlockAttentionKernels {
    void (*qk)(const float* k, size_t stride, int hd, int j0, int j1, const float* const* q, int nq,
               float scale, float* const* s);
    void (*pv)(const float* v, size_t stride, int hd, int j0, int j1, const float* const* p, int nq,
               float* const* out);
    // The scores over keys in transposed blocks, as the KV cache keeps an F32 / F16 key side
    // (model/state/kv_cache.h): row j's value d at k[(j / kKeyBlock) * bs + kKeyBlock * d + j %
    // kKeyBlock] (bs: values from one block of kKeyBlock rows to the next), F16 values widened as
    // loaded. s[i][j] = scale * (e + o), e the FMA chain of q[i][d] * value d over even d in order
    // from 0, o over odd d: a row's score is the work of its own lane, with no sum across lanes, so
    // it depends only on q[i] and the row, and is the same at every ISA level.
    void (*qk_t)(const float* k, size_t bs, int hd, int j0, int j1, const float* const* q, int nq,
                 float scale, float* const* s);
    void (*qk_th)(const uint16_t* k, size_t bs, int hd, int j0, int j1, const float* const* q,
                  int nq, float scale, float* const* s);
    // pv over F16 rows (`stride` halves apart), each value widened exactly as it is loaded: the
    // same results as pv on the rows converted to floats first.
    void (*pv_h)(const uint16_t* v, size_t stride, int hd, int j0, int j1, const float* const* p,
                 int nq, float* const* out);
    // The scores over Q8_0 key rows (`stride` bytes apart; k points at the KV head's first block
    // of row 0) for queries rounded to Q8_0: s[i][j] = scale * sum over blocks b, in order, of
    // fma(float(integer dot of q[i] and row j over block b), d_k * d_q, acc) from acc = 0. The
    // integer dots are exact, so the result depends only on q[i] and the row. Null where the ISA
    // has none, or for head sizes it does not cover: the caller widens the rows and uses qk on the
    // rounded query then.
    void (*qk_q8)(const uint8_t* k, size_t stride, int hd, int j0, int j1,
                  const KeyQueryQ8* const* q, int nq, float scale, float* const* s);
    // pv over Q8_0 value rows (`stride` bytes apart; v at the KV head's first block of row 0),
    // each value d * q widened as loaded: the same results as pv on the rows dequantized first.
    // Null where the ISA has none or for head sizes it does not cover.
    void (*pv_q8)(const uint8_t* v, size_t stride, int hd, int j0, int j1, const float* const* p,
                  int nq, float* const* out);
    // x[0..n) = softmax(x), the same bits at AVX-512 and AVX2 (the result depends only on the
    // row's values): m = max, e = e^(max(x - m, -104)) as x - m = n ln2 + r (n rounded to
    // nearest even), the degree-7 Taylor polynomial of e^r in Horner FMAs, times 2^n rounded
    // once; the e summed in double precision, column c of each group of 16 into lane c % 8 of
    // accumulator c / 8, the 8 lanes of their sum added ((0+4)+(1+5))+((2+6)+(3+7)); each e
    // times float(1 / sum).
    void (*softmax)(float* x, int n);
};

}  // namespace specula
