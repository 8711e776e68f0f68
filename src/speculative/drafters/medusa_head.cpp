// MedusaHeads: see medusa_head.h.
#include "speculative/drafters/medusa_head.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "gguf/gguf.h"
#include "sampling/sampler.h"

namespace specula {

namespace {

// Key `key` of the head file, checked to lie in [lo, hi].
int bounded_key(const GGUFFile& f, const Model& target, const char* key, int64_t def, int lo,
                int hi) {
    if (def < 0 && !f.has(key))
        fail(f.path(), ": key '", key, "' is missing (a Medusa head file for ",
             target.file().path(), ")");
    const int64_t v = def < 0 ? f.get_int(key) : f.get_int_or(key, def);
    if (v < lo || v > hi)
        fail(f.path(), ": key '", key, "' is ", v, ", must be in [", lo, ", ", hi,
             "] (drafting for ", target.file().path(), ")");
    return int(v);
}

void read_keys(MedusaHeads& m, const Model& target, int& n_heads, int& n_blocks) {
    const GGUFFile& f = *m.file;
    const std::string arch = f.get_string_or("general.architecture", "");
    if (arch != "medusa")
        fail(f.path(), ": key 'general.architecture' is '", arch,
             "', a Medusa head file's is 'medusa' (for ", target.file().path(), ")");
    n_heads = bounded_key(f, target, "medusa.head_count", -1, 1, kMaxMedusaHeads);
    n_blocks = bounded_key(f, target, "medusa.block_count", 1, 1, 8);
    const int d = target.hparams().n_embd;
    m.n_embd = int(f.get_int_or("medusa.embedding_length", -1));
    if (m.n_embd != d)
        fail(f.path(), ": key 'medusa.embedding_length' is ", m.n_embd, ", the hidden size of ",
             target.file().path(), " is ", d);
    const int nv = target.hparams().n_vocab;
    const int64_t fv = f.get_int_or("medusa.vocab_size", nv);
    if (fv != nv)
        fail(f.path(), ": key 'medusa.vocab_size' is ", fv, ", the vocabulary of ",
             target.file().path(), " has ", nv, " tokens");
}

}  // namespace

std::unique_ptr<MedusaHeads> MedusaHeads::load(const std::string& path, const Model& target) {
    auto m = std::make_unique<MedusaHeads>();
    m->file = GGUFFile::open(path);
    m->target = &target;
    int n_heads = 0, n_blocks = 0;
    read_keys(*m, target, n_heads, n_blocks);
    TensorBinder b(*m->file, m->owned);
    const int64_t d = m->n_embd, nv = target.hparams().n_vocab;
    if (!target.output.data) fail(target.file().path(), ": the target has no output matrix");
    for (int i = 0; i < n_heads; ++i) {
        Head& h = m->heads.emplace_back();
        const std::string pre = "medusa." + std::to_string(i) + ".";
        for (int j = 0; j < n_blocks; ++j) {
            const std::string blk = pre + "blk." + std::to_string(j) + ".";
            h.w.push_back(b.matrix(blk + "weight", {d, d}));
            h.b.push_back(b.vector(blk + "bias", d));
        }
        h.output = b.matrix(pre + "output.weight", {d, nv}, Need::Optional);
        if (!h.output.data) h.output = target.output;
    }
    return m;
}

namespace {

// Head i's blocks over `rows` rows gathered from hidden (sequence seq[r] for row r), into st.x
// from row `first` on (n_embd each); st.y is the scratch.
void run_blocks(const MedusaHeads& m, MedusaState& st, int i, std::span<const float* const> hidden,
                std::span<const int> seq, int first, ThreadPool& pool) {
    const MedusaHeads::Head& h = m.heads[size_t(i)];
    const int64_t d = m.n_embd;
    const int rows = int(seq.size());
    float* x0 = st.x.data() + d * first;
    st.y.resize(size_t(d * rows));
    for (int r = 0; r < rows; ++r)
        std::copy(hidden[size_t(seq[size_t(r)])], hidden[size_t(seq[size_t(r)])] + d, x0 + d * r);
    for (size_t j = 0; j < h.w.size(); ++j) {
        matmul(h.w[j], x0, d, rows, st.y.data(), d, pool, st.mm);
        for (int r = 0; r < rows; ++r) {
            float* x = x0 + d * r;
            const float* y = st.y.data() + d * r;
            for (int64_t c = 0; c < d; ++c) {
                const float z = y[c] + h.b[j][c];
                x[c] += z / (1.0f + std::exp(-z));  // SiLU
            }
        }
    }
}

// The first n_heads heads over the sequences still drafting at each (st.active, st.head: row r is
// head st.head[r] of sequence st.active[r]): every head's blocks, then the output matrices, ONE
// matmul over the rows of the heads that share one (the target's, when the file has none of its
// own: 4 heads on a 152k vocabulary read it once, not 4 times). st.logits: n_vocab per row.
void run_heads(const MedusaHeads& m, MedusaState& st, int n_heads, std::span<const int> n,
               std::span<const float* const> hidden, ThreadPool& pool) {
    const int64_t d = m.n_embd;
    const int nv = m.target->hparams().n_vocab;
    st.active.clear();
    st.head.clear();
    for (int i = 0; i < n_heads; ++i) {
        for (size_t s = 0; s < hidden.size(); ++s) {
            if (n[s] > i) st.active.push_back(int(s)), st.head.push_back(i);
        }
    }
    const int rows = int(st.active.size());
    st.x.resize(size_t(d * rows));
    st.logits.resize(size_t(nv) * size_t(rows));
    for (int first = 0, i = 0; i < n_heads; ++i) {
        int end = first;
        while (end < rows && st.head[size_t(end)] == i) ++end;
        run_blocks(m, st, i, hidden,
                   std::span(st.active).subspan(size_t(first), size_t(end - first)), first, pool);
        first = end;
    }
    for (int first = 0; first < rows;) {  // runs of rows whose heads share an output matrix
        const WeightView& out = m.heads[size_t(st.head[size_t(first)])].output;
        int end = first;
        while (end < rows && m.heads[size_t(st.head[size_t(end)])].output.data == out.data) ++end;
        matmul(out, st.x.data() + d * first, d, end - first,
               st.logits.data() + size_t(nv) * size_t(first), nv, pool, st.mm);
        first = end;
    }
}

}  // namespace

void medusa_draft_rows(const MedusaHeads& m, MedusaState& st, std::span<const float* const> hidden,
                       std::span<const int> n, std::span<std::vector<token_id>* const> out,
                       ThreadPool& pool) {
    const int nv = m.target->hparams().n_vocab;
    int n_heads = 0;
    for (size_t s = 0; s < hidden.size(); ++s) {
        out[s]->clear();
        n_heads = std::max(n_heads, std::min(n[s], int(m.heads.size())));
    }
    run_heads(m, st, n_heads, n, hidden, pool);
    for (size_t r = 0; r < st.active.size(); ++r)  // head order: each sequence's drafts in order
        out[size_t(st.active[r])]->push_back(argmax(st.logits.data() + size_t(nv) * r, nv));
}

void medusa_draft(const MedusaHeads& m, MedusaState& st, const float* hidden, int n,
                  std::vector<token_id>& out, ThreadPool& pool, std::vector<float>* logits) {
    const float* const rows[] = {hidden};
    std::vector<token_id>* const outs[] = {&out};
    medusa_draft_rows(m, st, rows, std::span<const int>(&n, 1), outs, pool);
    if (logits) logits->assign(st.logits.begin(), st.logits.end());  // head i's at i * n_vocab
}

}  // namespace specula
