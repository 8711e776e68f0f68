// Private to kernels/gemm_amx.cpp: the AMX tile operations its kernel is written over, twice
// with one interface: AmxHw issues the instructions (inline assembly, so no compiler flag is
// needed, with memory clobbers so the compiler orders the tile loads and stores with the code
// around them), AmxEmu computes them in scalar code on a per-thread copy of the tile registers,
// checking the shapes the hardware would fault on, so the kernel's logic is tested on any CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/error.h"

namespace specula::simd {

// LDTILECFG's 64-byte operand (palette 1): bytes per row and rows of each of the 8 tiles.
struct alignas(64) TileConfig {
    uint8_t palette = 1;
    uint8_t start_row = 0;
    uint8_t reserved0[14] = {};
    uint16_t colsb[16] = {};  // tiles 0..7; 8..15 reserved, zero
    uint8_t rows[16] = {};    // tiles 0..7; 8..15 reserved, zero
};
static_assert(sizeof(TileConfig) == 64);

struct AmxHw {
    static void configure(const TileConfig& c) { __asm__ volatile("ldtilecfg %0" ::"m"(c)); }
    template <int T>
    static void load(const void* p, size_t stride) {
        __asm__ volatile("tileloadd (%0,%1,1), %%tmm%c2" ::"r"(p), "r"(stride), "i"(T) : "memory");
    }
    template <int T>
    static void store(void* p, size_t stride) {
        __asm__ volatile("tilestored %%tmm%c2, (%0,%1,1)" ::"r"(p), "r"(stride), "i"(T) : "memory");
    }
    template <int T>
    static void zero() {
        __asm__ volatile("tilezero %%tmm%c0" ::"i"(T));
    }
    // C += A (signed bytes) . B (unsigned bytes), in groups of 4.
    template <int C, int A, int B>
    static void dpbsud() {
        __asm__ volatile("tdpbsud %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"i"(C), "i"(A), "i"(B));
    }
};

struct AmxEmu {
    struct Tile {
        int rows = 0, colsb = 0;
        uint8_t d[16][64];
    };
    static Tile* tiles() {
        thread_local Tile t[8];
        return t;
    }
    static void configure(const TileConfig& c) {
        if (c.palette != 1) fail("AMX emulation: palette ", int(c.palette));
        for (int i = 0; i < 8; ++i) {
            if (c.rows[i] > 16 || c.colsb[i] > 64 || c.colsb[i] % 4 != 0)
                fail("AMX emulation: tile ", i, " is ", int(c.rows[i]), " x ", c.colsb[i]);
            tiles()[i].rows = c.rows[i];
            tiles()[i].colsb = c.colsb[i];
            std::memset(tiles()[i].d, 0, sizeof(Tile::d));
        }
    }
    template <int T>
    static void load(const void* p, size_t stride) {
        Tile& t = tiles()[T];
        for (int r = 0; r < t.rows; ++r)
            std::memcpy(t.d[r], static_cast<const uint8_t*>(p) + r * stride, t.colsb);
    }
    template <int T>
    static void store(void* p, size_t stride) {
        const Tile& t = tiles()[T];
        for (int r = 0; r < t.rows; ++r)
            std::memcpy(static_cast<uint8_t*>(p) + r * stride, t.d[r], t.colsb);
    }
    template <int T>
    static void zero() {
        std::memset(tiles()[T].d, 0, sizeof(Tile::d));
    }
    template <int C, int A, int B>
    static void dpbsud() {
        Tile &c = tiles()[C], &a = tiles()[A], &b = tiles()[B];
        // The shapes TDPBSUD requires (#UD otherwise).
        if (c.rows != a.rows || c.colsb != b.colsb || a.colsb != 4 * b.rows || c.rows == 0)
            fail("AMX emulation: tdpbsud of ", c.rows, "x", c.colsb, " with ", a.rows, "x", a.colsb,
                 " and ", b.rows, "x", b.colsb);
        for (int m = 0; m < c.rows; ++m) {
            for (int n = 0; n < c.colsb / 4; ++n) {
                int32_t acc;
                std::memcpy(&acc, &c.d[m][4 * n], 4);
                for (int k = 0; k < a.colsb / 4; ++k) {
                    for (int j = 0; j < 4; ++j) {
                        acc += static_cast<int8_t>(a.d[m][4 * k + j]) *
                               static_cast<int32_t>(b.d[k][4 * n + j]);
                    }
                }
                std::memcpy(&c.d[m][4 * n], &acc, 4);
            }
        }
    }
};

}  // namespace specula::simd
