// The type -> quantizer table (quantize/row_quantizer.h).
#include "quantize/row_quantizer.h"

#include <array>

#include "kernels/quants.h"
#include "quantize/weight_quants.h"

namespace specula::quant {

namespace {

template <GGMLType T>
void via_reference(const float* src, void* dst, int64_t n) {
    quantize_row(T, src, dst, n);
}

template <class Block, void (*F)(const float*, Block*, int64_t)>
void via_weight_quant(const float* src, void* dst, int64_t n) {
    F(src, static_cast<Block*>(dst), n);
}

struct Row {
    GGMLType type;
    RowQuantizer quantize;
};

constexpr Row kRows[] = {
    {GGMLType::F32, via_reference<GGMLType::F32>},
    {GGMLType::F16, via_reference<GGMLType::F16>},
    {GGMLType::BF16, via_reference<GGMLType::BF16>},
    {GGMLType::Q8_0, via_reference<GGMLType::Q8_0>},
    {GGMLType::Q4_0, via_reference<GGMLType::Q4_0>},
    {GGMLType::Q4_1, via_reference<GGMLType::Q4_1>},
    {GGMLType::Q5_0, via_reference<GGMLType::Q5_0>},
    {GGMLType::Q5_1, via_reference<GGMLType::Q5_1>},
    {GGMLType::Q4_K, via_weight_quant<block_q4_K, quantize_q4_K>},
    {GGMLType::Q5_K, via_weight_quant<block_q5_K, quantize_q5_K>},
    {GGMLType::Q6_K, via_weight_quant<block_q6_K, quantize_q6_K>},
    {GGMLType::IQ4_NL, via_weight_quant<block_iq4_nl, quantize_iq4_nl>},
    {GGMLType::IQ4_XS, via_weight_quant<block_iq4_xs, quantize_iq4_xs>},
};

}  // namespace

RowQuantizer row_quantizer(GGMLType t) {
    for (const Row& r : kRows)
        if (r.type == t) return r.quantize;
    return nullptr;
}

}  // namespace specula::quant
