// The tiled Q8_0 layout (see repack.h): repacking, reading a row back, the activation sums and the
// scalar reference tile kernel.
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/error.h"
#include "kernels/layout/blocks.h"
#include "kernels/layout/fp16.h"
#include "kernels/layout/repack_float.h"
#include "kernels/layout/repack_k.h"
#include "kernels/policy.h"
#include "kernels/repack.h"

namespace specula {

namespace {

int64_t n_blocks(int64_t cols) {
    return cols / QK8_0;
}

// Where block b of a tile starts: its 16 fp16 scales and its 8 x 64 quant bytes.
const uint8_t* block_scales(const uint8_t* tile, int64_t b) {
    return tile + (b >> 1) * kPackPairBytes + (b & 1) * 32;
}
const uint8_t* block_quants(const uint8_t* tile, int64_t b) {
    return tile + (b >> 1) * kPackPairBytes + 64 + (b & 1) * 512;
}

// Block b's 8 quant lines of a whole tile (16 rows at src) to q, offset by 128: 4 rows at a time
// with SSE2 (x86-64's baseline), a row's 16 bytes being 4 lines' 4 bytes, so 4 rows' vectors
// transpose (4 x 4 dwords) into 4 lines' 16-byte stretches (4-byte moves: most of a Q8_0 8B load's
// repacking).
#if defined(__SSE2__)
constexpr bool kQuantLinesSse2 = true;
void quant_lines_sse2(const block_q8_0* const* src, int64_t b, uint8_t* q) {
    const __m128i bias = _mm_set1_epi8(static_cast<char>(0x80));
    for (int r0 = 0; r0 < kPackRows; r0 += 4) {
        for (int h = 0; h < 2; ++h) {  // lines 4h .. 4h + 3
            __m128i v[4];
            for (int i = 0; i < 4; ++i) {
                v[i] = _mm_xor_si128(
                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(src[r0 + i][b].qs + 16 * h)),
                    bias);
            }
            const __m128i a = _mm_unpacklo_epi32(v[0], v[1]), c = _mm_unpacklo_epi32(v[2], v[3]);
            const __m128i e = _mm_unpackhi_epi32(v[0], v[1]), f = _mm_unpackhi_epi32(v[2], v[3]);
            const __m128i line[4] = {_mm_unpacklo_epi64(a, c), _mm_unpackhi_epi64(a, c),
                                     _mm_unpacklo_epi64(e, f), _mm_unpackhi_epi64(e, f)};
            for (int g = 0; g < 4; ++g) {
                _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 64 * (4 * h + g) + 4 * r0),
                                 line[g]);
            }
        }
    }
}
#else
constexpr bool kQuantLinesSse2 = false;
void quant_lines_sse2(const block_q8_0* const*, int64_t, uint8_t*) {}
#endif

}  // namespace

bool repackable(GGMLType t) {
    return t == GGMLType::Q8_0 || kq_repackable(t) || float_repackable(t);
}

size_t packed_tile_bytes(int64_t cols) {
    return static_cast<size_t>((n_blocks(cols) + 1) / 2) * kPackPairBytes;
}

size_t packed_tile_bytes(GGMLType t, int64_t cols) {
    if (float_repackable(t)) return float_tile_bytes(cols);
    return kq_repackable(t) ? kq_tile_bytes(t, cols) : packed_tile_bytes(cols);
}

size_t packed_size(const WeightView& W) {
    return static_cast<size_t>((W.rows + kPackRows - 1) / kPackRows) *
           packed_tile_bytes(W.type, W.cols);
}

WeightView stack_slice(const WeightView& W, int i, int n) {
    WeightView v = W;
    v.rows = W.rows / n;
    v.data = W.data + static_cast<size_t>(i) * v.rows * W.row_bytes();
    if (W.packed)
        v.packed = W.packed + (i * v.rows / kPackRows) * packed_tile_bytes(W.type, W.cols);
    return v;
}

void repack(const WeightView& W, uint8_t* dst) {
    if (kq_repackable(W.type)) return kq_repack(W, dst);
    if (float_repackable(W.type)) return float_repack(W, dst);
    if (!repackable(W.type) || W.cols % QK8_0 != 0) {
        fail("repack: ", type_name(W.type), " weight with ", W.cols, " columns cannot be packed");
    }
    const int64_t nb = n_blocks(W.cols), tiles = (W.rows + kPackRows - 1) / kPackRows;
    const size_t tb = packed_tile_bytes(W.cols);
    for (int64_t ti = 0; ti < tiles; ++ti) {
        uint8_t* tile = dst + ti * tb;
        // Every byte is written below (rows past the end as zero scales and quants) but an odd
        // block count's unused half of the last pair: zeroed here, not the whole tile first (a
        // second pass over every packed byte: 8-17% of a load's samples).
        if (nb % 2 == 1) {
            uint8_t* last = tile + (nb >> 1) * kPackPairBytes;
            std::memset(last + 32, 0, 32);
            std::memset(last + 64 + 512, 0, 512);
        }
        // Block by block, each 64-byte line of quants written whole (line g: bytes 4g..4g+3 of
        // the 16 rows, offset by 128), so the tile is written once, front to back: written row by
        // row, 4 bytes per line, each line was stored to 16 times and repacking took 62% of a
        // Q8_0 8B load's samples.
        const block_q8_0* src[kPackRows];
        const bool full = (ti + 1) * kPackRows <= W.rows && kQuantLinesSse2;
        for (int r = 0; r < kPackRows; ++r) {
            const int64_t row = ti * kPackRows + r;
            src[r] = row < W.rows ? reinterpret_cast<const block_q8_0*>(W.row(row)) : nullptr;
        }
        for (int64_t b = 0; b < nb; ++b) {
            auto* sc = const_cast<uint8_t*>(block_scales(tile, b));
            auto* q = const_cast<uint8_t*>(block_quants(tile, b));
            for (int r = 0; r < kPackRows; ++r) {
                const fp16_t d = src[r] ? src[r][b].d : fp16_t{0};
                std::memcpy(sc + 2 * r, &d, 2);
            }
            if (full) {
                quant_lines_sse2(src, b, q);
                continue;
            }
            // Each line stored in place, 4 bytes at a time (a line built on the stack and copied
            // whole stalls on store forwarding).
            for (int g = 0; g < QK8_0 / 4; ++g) {
                for (int r = 0; r < kPackRows; ++r) {
                    uint32_t v = 0;
                    if (src[r]) std::memcpy(&v, src[r][b].qs + 4 * g, 4);
                    v ^= 0x80808080u;
                    std::memcpy(q + 64 * g + 4 * r, &v, 4);
                }
            }
        }
    }
}

void dequantize_packed_row(const WeightView& W, int64_t r, float* out) {
    if (kq_repackable(W.type)) return kq_dequantize_packed_row(W, r, out);
    if (float_repackable(W.type)) return float_dequantize_packed_row(W, r, out);
    const uint8_t* tile = W.packed + (r / kPackRows) * packed_tile_bytes(W.cols);
    const int i = static_cast<int>(r % kPackRows);
    for (int64_t b = 0; b < n_blocks(W.cols); ++b) {
        fp16_t h;
        std::memcpy(&h, block_scales(tile, b) + 2 * i, 2);
        const float d = fp16_to_fp32(h);
        const uint8_t* q = block_quants(tile, b);
        for (int k = 0; k < QK8_0; ++k) {
            const int v = static_cast<int8_t>(q[(k / 4) * 64 + 4 * i + k % 4] ^ 0x80);
            out[b * QK8_0 + k] = d * static_cast<float>(v);
        }
    }
}

PackedBuffer::PackedBuffer(size_t bytes, Pages pages) : n_(bytes) {
    if (bytes == 0) return;
    const bool huge = pages == Pages::policy && kernel_policy().hugepages;
    const size_t pad = huge ? kHugePage : 0;
    void* p = mmap(nullptr, bytes + pad, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fail("cannot allocate ", bytes, " bytes for packed weights");
    map_ = p;
    map_bytes_ = bytes + pad;
    auto a = reinterpret_cast<uintptr_t>(p);
    if (huge) {
        a = (a + kHugePage - 1) / kHugePage * kHugePage;
        madvise(reinterpret_cast<void*>(a), bytes, MADV_HUGEPAGE);
    } else if (pages == Pages::small) {
        madvise(p, bytes, MADV_NOHUGEPAGE);  // also where transparent huge pages are "always"
    }
    p_ = reinterpret_cast<uint8_t*>(a);  // page aligned, zero-filled
}

PackedBuffer::~PackedBuffer() {
    if (map_) munmap(map_, map_bytes_);
}

void PackedBuffer::release(size_t from, size_t to) {
    to = std::min(to, n_);
    if (p_ && from < to) release_mapped_pages(p_ + from, to - from);
}

void PackedBuffer::advise_huge(size_t from, size_t to) {
    to = std::min(to, n_);
    if (!p_ || from >= to) return;
    const auto a = reinterpret_cast<uintptr_t>(p_);
    const uintptr_t lo = (a + from + kHugePage - 1) / kHugePage * kHugePage;
    const uintptr_t hi = (a + to) / kHugePage * kHugePage;
    if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
}

void release_mapped_pages(const void* p, size_t n) {
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto a = reinterpret_cast<uintptr_t>(p);
    const uintptr_t lo = (a + page - 1) / page * page, hi = (a + n) / page * page;
    if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

void packed_act_sums(const uint8_t* acts, size_t stride, int64_t nb, int ntok, float* d,
                     int32_t* corr) {
    for (int t = 0; t < ntok; ++t) {
        const auto* blk = reinterpret_cast<const block_q8_0*>(acts + t * stride);
        for (int64_t b = 0; b < nb; ++b) {
            int s = 0;
            for (int k = 0; k < QK8_0; ++k) s += blk[b].qs[k];
            d[t * nb + b] = fp16_to_fp32(blk[b].d);
            corr[t * nb + b] = -128 * s;
        }
    }
}

void packed_act_records(const PackedActs& a, int ntok, uint8_t* out) {
    for (int64_t b = 0; b < a.nb; ++b, out += block_record_bytes(ntok)) {
        uint8_t* q = out + 2 * sizeof(int32_t) * ntok;
        for (int t = 0; t < ntok; ++t) {
            std::memcpy(out + sizeof(int32_t) * t, &a.corr[t * a.nb + b], sizeof(int32_t));
            std::memcpy(out + sizeof(int32_t) * (ntok + t), &a.d[t * a.nb + b], sizeof(float));
            const auto* blk = reinterpret_cast<const block_q8_0*>(a.q + t * a.stride) + b;
            std::memcpy(q + QK8_0 * t, blk->qs, QK8_0);
        }
    }
}

void packed_tile_ref(const uint8_t* tile, const PackedActs& a, int ntok, int lo, int hi, float* y,
                     int64_t ldy) {
    for (int t = 0; t < ntok; ++t) {
        const auto* blk = reinterpret_cast<const block_q8_0*>(a.q + t * a.stride);
        for (int r = lo; r < hi; ++r) {
            float acc = 0.0f;
            for (int64_t b = 0; b < a.nb; ++b) {
                fp16_t h;
                std::memcpy(&h, block_scales(tile, b) + 2 * r, 2);
                const uint8_t* q = block_quants(tile, b);
                int32_t isum = a.corr[t * a.nb + b];
                for (int k = 0; k < QK8_0; ++k) {
                    isum += static_cast<int32_t>(q[(k / 4) * 64 + 4 * r + k % 4]) * blk[b].qs[k];
                }
                acc = std::fma(static_cast<float>(isum), fp16_to_fp32(h) * a.d[t * a.nb + b], acc);
            }
            y[t * ldy + (r - lo)] = acc;
        }
    }
}

}  // namespace specula
