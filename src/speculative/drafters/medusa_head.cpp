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

// Head i over the rows of st.active: st.x (one row each, gathered from hidden) through its blocks,
// then its output into st.logits (n_vocab per row).
void run_head(const MedusaHeads& m, MedusaState& st, int i, std::span<const float* const> hidden,
              ThreadPool& pool) {
    const MedusaHeads::Head& h = m.heads[size_t(i)];
    const int64_t d = m.n_embd;
    const int rows = int(st.active.size());
    const int nv = m.target->hparams().n_vocab;
    st.x.resize(size_t(d * rows));
    st.y.resize(size_t(d * rows));
    st.logits.resize(size_t(nv) * size_t(rows));
    for (int r = 0; r < rows; ++r)
        std::copy(hidden[size_t(st.active[size_t(r)])], hidden[size_t(st.active[size_t(r)])] + d,
                  st.x.begin() + d * r);
    for (size_t j = 0; j < h.w.size(); ++j) {
        matmul(h.w[j], st.x.data(), d, rows, st.y.data(), d, pool, st.mm);
        for (int r = 0; r < rows; ++r) {
            float* x = st.x.data() + d * r;
            const float* y = st.y.data() + d * r;
            for (int64_t c = 0; c < d; ++c) {
                const float z = y[c] + h.b[j][c];
                x[c] += z / (1.0f + std::exp(-z));  // SiLU
            }
        }
    }
    matmul(h.output, st.x.data(), d, rows, st.logits.data(), nv, pool, st.mm);
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
    for (int i = 0; i < n_heads; ++i) {
        st.active.clear();
        for (size_t s = 0; s < hidden.size(); ++s)
            if (n[s] > i) st.active.push_back(int(s));
        run_head(m, st, i, hidden, pool);
        for (size_t r = 0; r < st.active.size(); ++r)
            out[size_t(st.active[r])]->push_back(argmax(st.logits.data() + size_t(nv) * r, nv));
    }
}

void medusa_draft(const MedusaHeads& m, MedusaState& st, const float* hidden, int n,
                  std::vector<token_id>& out, ThreadPool& pool, std::vector<float>* logits) {
    const float* const rows[] = {hidden};
    std::vector<token_id>* const outs[] = {&out};
    if (!logits) {
        medusa_draft_rows(m, st, rows, std::span<const int>(&n, 1), outs, pool);
        return;
    }
    logits->clear();
    // One head at a time, keeping each head's logits (tests).
    out.clear();
    n = std::min(n, int(m.heads.size()));
    st.active.assign(1, 0);
    for (int i = 0; i < n; ++i) {
        run_head(m, st, i, rows, pool);
        out.push_back(argmax(st.logits.data(), int(st.logits.size())));
        logits->insert(logits->end(), st.logits.begin(), st.logits.end());
    }
}

}  // namespace specula
