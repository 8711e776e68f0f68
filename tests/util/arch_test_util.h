// What the per-architecture tests (test_model_arch_*.cpp) share: random prompts, evaluating a
// prompt in passes of given sizes, the batch-invariance check (any split of a prompt gives the
// logits of one token at a time, bit for bit, at 1 and 2 threads), and bad-input files written
// as edited copies of a good one, whose load must fail naming the file and what is wrong.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/load/model.h"
#include "model/session.h"
#include "test_util.h"

namespace specula::test {

inline std::vector<token_id> random_tokens(int n, int seed, int n_vocab = 512) {
    std::mt19937 rng(seed);
    std::vector<token_id> t(size_t(n), 0);
    for (auto& x : t) x = token_id(rng() % unsigned(n_vocab));
    return t;
}

// Evaluates `ids` in passes of the given sizes (cycled; all logits) and returns every row.
inline std::vector<float> run_split(const Model& m, const std::vector<token_id>& ids,
                                    const std::vector<int>& sizes, int n_threads, int n_ctx = 128) {
    Session s(m, SessionParams{n_ctx, n_threads});
    const int nv = m.hparams().n_vocab;
    std::vector<float> out;
    size_t at = 0;
    for (size_t i = 0; at < ids.size(); ++i) {
        const int n = std::min<int>(sizes[i % sizes.size()], int(ids.size() - at));
        s.eval(std::span<const token_id>(ids.data() + at, size_t(n)));
        for (int r = 0; r < n; ++r) out.insert(out.end(), s.logits(r), s.logits(r) + nv);
        at += size_t(n);
    }
    return out;
}

// Each split of `ids` (and the whole as one pass) at 1 and 2 threads gives the logits of one
// token at a time, bit for bit.
inline void expect_batch_invariant(const std::string& path, const std::vector<token_id>& ids,
                                   const std::vector<std::vector<int>>& splits, int n_ctx = 128) {
    const auto m = Model::load(path);
    const auto one = run_split(*m, ids, {1}, 1, n_ctx);
    std::vector<std::vector<int>> all = {{int(ids.size())}};
    all.insert(all.end(), splits.begin(), splits.end());
    for (const auto& sizes : all) {
        for (int threads : {1, 2}) {
            const auto got = run_split(*m, ids, sizes, threads, n_ctx);
            ASSERT_EQ(got.size(), one.size());
            EXPECT_EQ(0, std::memcmp(got.data(), one.data(), one.size() * sizeof(float)))
                << path << ": passes of " << sizes[0] << ".. tokens (" << threads
                << " threads) differ from one token at a time";
        }
    }
}

// An edited copy of a GGUF file: keys dropped or set, a tensor dropped or cut to its first rows.
struct GgufEdit {
    std::vector<std::string> drop_keys;
    std::vector<std::pair<std::string, uint32_t>> set_u32;
    std::vector<std::pair<std::string, float>> set_f32;
    std::vector<std::pair<std::string, bool>> set_bool;
    std::vector<std::pair<std::string, std::string>> set_str;
    std::string drop_tensor;
    std::string cut_tensor;  // keeps only the first `cut_rows` rows of this matrix
    int64_t cut_rows = 0;
};

// Writes the edited copy of `src_path` as <temp dir>/<tag>.gguf and returns its path.
inline std::string write_variant(const std::string& src_path, const std::string& tag,
                                 const GgufEdit& ed) {
    const auto src = GGUFFile::open(src_path);
    GGUFWriter w;
    for (const auto& [k, v] : src->metadata()) {
        if (std::find(ed.drop_keys.begin(), ed.drop_keys.end(), k) == ed.drop_keys.end())
            w.set(k, v);
    }
    for (const auto& [k, v] : ed.set_u32) w.set_u32(k, v);
    for (const auto& [k, v] : ed.set_f32) w.set_f32(k, v);
    for (const auto& [k, v] : ed.set_bool) w.set_bool(k, v);
    for (const auto& [k, v] : ed.set_str) w.set_string(k, v);
    for (const auto& t : src->tensors()) {
        if (t.name == ed.drop_tensor) continue;
        if (t.name == ed.cut_tensor) {
            const size_t row = t.nbytes / size_t(t.ne[1]);
            w.add_tensor(t.name, {t.ne[0], ed.cut_rows}, t.type, t.data, row * size_t(ed.cut_rows));
        } else {
            w.add_tensor(t.name, t.ne, t.type, t.data, t.nbytes);
        }
    }
    const std::string path = temp_dir("arch") + "/" + tag + ".gguf";
    w.write(path);
    return path;
}

// Model::load(path) fails with an Error naming the file and containing every needle.
inline void expect_load_error(const std::string& path, const std::vector<std::string>& needles) {
    try {
        Model::load(path);
        ADD_FAILURE() << path << ": loaded without error";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(path), std::string::npos) << "names the file: " << msg;
        for (const auto& n : needles) {
            EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
        }
    }
}

}  // namespace specula::test
