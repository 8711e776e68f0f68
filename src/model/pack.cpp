// pack_weights (model.h): every dense matrix of a repackable type gets a packed copy, and the
// pages of its original in the file mapping are released unless the token embedding (which
// get_rows reads in the row layout) is that same tensor.
#include <initializer_list>

#include "kernels/repack_float.h"
#include "model/model.h"

namespace specula {

namespace {

void pack_one(Model& m, WeightView& w) {
    if (!w.data || w.packed || !repackable(w.type) || w.rows == 0) return;
    if (float_repackable(w.type) && !float_repack_at_load()) return;
    PackedBuffer& buf = m.packed.emplace_back(packed_size(w));
    repack(w, buf.data());
    w.packed = buf.data();
    if (w.data != m.tok_embd.data) release_mapped_pages(w.data, w.row_bytes() * w.rows);
}

}  // namespace

void pack_weights(Model& m) {
    for (LayerWeights& l : m.layers) {
        for (WeightView* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down}) {
            pack_one(m, *w);
        }
    }
    pack_one(m, m.output);
}

}  // namespace specula
