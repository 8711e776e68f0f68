// pack_weights (model.h): every dense matrix of a repackable type (and every stack of experts of
// whole tiles) gets a packed copy, and the
// pages of its original in the file mapping are released unless the token embedding (which
// get_rows reads in the row layout) is that same tensor.
//
// The copies are made on a thread pool, the largest matrices first, each thread taking the next
// one as it finishes. Besides halving the copying itself on two threads, this spreads the first
// touch of the new pages over the threads: where that is what a load waits for (a VM whose host
// backs guest memory only when it is first written: measured on a 2-core KVM guest, 0.4-0.5 GB/s
// per thread, and twice that on two), it is most of the load.
#include <algorithm>
#include <atomic>
#include <exception>
#include <initializer_list>
#include <mutex>

#include "common/env.h"
#include "common/threadpool.h"
#include "kernels/layout/repack_float.h"
#include "model/load/model.h"
#include "model/load/pack_cache.h"

namespace specula {

namespace {

bool packs(const WeightView& w) {
    if (!w.data || w.packed || !repackable(w.type) || w.rows == 0) return false;
    return !float_repackable(w.type) || float_repack_at_load();
}

struct PackJob {
    WeightView* w;
    uint8_t* dst;
    bool mapped;  // w.data lies in the file mapping, whose pages are released once packed
};

// A layer's dense matrices (a main layer's or the MTP head's) and, made at load, MLA's per-head
// stacks (deepseek2's K_b^T and V_b; head h is stack_slice(w, h, n_head)), packed when each head
// is whole tiles.
void add_layer(LayerWeights& l, int n_head, std::vector<WeightView*>& todo,
               std::vector<const WeightView*>& made) {
    // Hybrid layers' DeltaNet projections and the shared expert (qwen35) too: left in the row
    // layout, they ran on the 1-token kernels (a 9-token verify of a Qwen3.5-2B-shaped file spent
    // 29% of its time there). Mamba-2's projection (nemotron_h) and MLA's projections the same.
    for (WeightView* w : {&l.wq,
                          &l.wk,
                          &l.wv,
                          &l.wqkv,
                          &l.wo,
                          &l.wq_a,
                          &l.wq_b,
                          &l.wkv_a_mqa,
                          &l.ffn_gate,
                          &l.ffn_up,
                          &l.ffn_gate_up,
                          &l.ffn_down,
                          &l.ssm_in,
                          &l.ssm_qkv,
                          &l.ssm_gate,
                          &l.ssm_beta,
                          &l.ssm_alpha,
                          &l.ssm_out,
                          &l.ffn_gate_shexp,
                          &l.ffn_up_shexp,
                          &l.ffn_down_shexp,
                          &l.ple_gate,
                          &l.ple_proj}) {
        if (packs(*w)) todo.push_back(w);
    }
    for (WeightView* w : {&l.wk_b_t, &l.wv_b}) {
        if (packs(*w) && (w->rows / n_head) % kPackRows == 0) {
            todo.push_back(w);
            made.push_back(w);
        }
    }
}

}  // namespace

void pack_weights(Model& m, int n_threads, const std::string& cache_dir) {
    std::vector<WeightView*> todo;
    std::vector<const WeightView*> made;  // matrices made at load (heap memory: kept as they are)
    const int nh = m.hparams().n_head;
    for (LayerWeights& l : m.layers) add_layer(l, nh, todo, made);
    // Stacked experts pack as one matrix when each expert is whole tiles: expert e is then tiles
    // [e * rows / kPackRows, ...) of it (model/blocks/moe.cpp's expert_view), and a pass over many
    // tokens (a prompt) runs each expert on the packed GEMM kernels.
    // A fused [gate | up] stack (gemma4's MoE) the same way when each half is whole tiles.
    const int ne = m.hparams().n_expert;
    for (LayerWeights& l : m.layers) {
        for (WeightView* w : {&l.ffn_gate_exps, &l.ffn_up_exps, &l.ffn_down_exps}) {
            if (ne > 0 && packs(*w) && (w->rows / ne) % kPackRows == 0) todo.push_back(w);
        }
        WeightView* gu = &l.ffn_gate_up_exps;
        if (ne > 0 && packs(*gu) && (gu->rows / ne / 2) % kPackRows == 0) todo.push_back(gu);
    }
    if (packs(m.output)) todo.push_back(&m.output);
    if (packs(m.per_layer_model_proj)) todo.push_back(&m.per_layer_model_proj);
    // The MTP head's layer and its own matrices (its experts, if any, keep the row layout).
    MtpWeights& h = m.mtp;
    add_layer(h.layer, nh, todo, made);
    for (WeightView* w : {&h.eh_proj, &h.head}) {
        if (packs(*w)) todo.push_back(w);
    }
    if (todo.empty()) return;

    // With a cache directory: its file of these matrices, mapped, or written once they are packed.
    std::vector<PackedMatrixDesc> descs;
    for (const WeightView* w : todo)
        descs.push_back({uint32_t(w->type), w->rows, w->cols, packed_size(*w)});
    uint64_t key = 0;
    std::string cache;
    if (!cache_dir.empty()) {
        key = pack_cache_key(m.file(), m.mtp_file(), descs);
        cache = pack_cache_path(cache_dir, m.file().path(), key);
        if ((m.packed_file = map_pack_cache(cache, key, descs))) {
            for (size_t i = 0; i < todo.size(); ++i) todo[i]->packed = m.packed_file->matrix(i);
            return;
        }
    }

    // Buffers are reserved here, on this thread (an allocation may throw); their pages are
    // touched by whichever thread repacks into them.
    std::vector<PackJob> jobs;
    std::vector<const uint8_t*> dst;  // in todo's order (the cache file's)
    for (WeightView* w : todo) {
        const bool mapped = std::find(made.begin(), made.end(), w) == made.end();
        jobs.push_back({w, m.packed.emplace_back(packed_size(*w)).data(), mapped});
        dst.push_back(jobs.back().dst);
    }
    std::stable_sort(jobs.begin(), jobs.end(), [](const PackJob& a, const PackJob& b) {
        return packed_size(*a.w) > packed_size(*b.w);
    });

    const uint8_t* embd = m.tok_embd.data;
    std::atomic<size_t> next{0};
    std::mutex err_mu;
    std::exception_ptr err;
    auto work = [&](int, int) {
        for (size_t i; (i = next.fetch_add(1)) < jobs.size();) {
            WeightView& w = *jobs[i].w;
            try {
                repack(w, jobs[i].dst);
            } catch (...) {
                const std::lock_guard<std::mutex> lock(err_mu);
                if (!err) err = std::current_exception();
                continue;
            }
            w.packed = jobs[i].dst;
            if (jobs[i].mapped && w.data != embd)
                release_mapped_pages(w.data, w.row_bytes() * w.rows);
        }
    };
    const int n =
        std::min({default_threads(n_threads), max_pool_threads(), static_cast<int>(jobs.size())});
    if (n == 1) {
        work(0, 1);
    } else {
        ThreadPool pool(n);
        pool.run(work);
    }
    if (err) std::rethrow_exception(err);
    if (!cache.empty()) write_pack_cache(cache, key, descs, dst);
}

void pack_head_weights(std::span<WeightView* const> ws, const Model& target,
                       std::vector<PackedBuffer>& packed) {
    if (!env_settings().repack) return;
    for (WeightView* w : ws) {
        if (!packs(*w) || w->cols % 256 != 0 || w->data == target.output.data) continue;
        uint8_t* dst = packed.emplace_back(packed_size(*w)).data();
        repack(*w, dst);
        w->packed = dst;
    }
}

}  // namespace specula
