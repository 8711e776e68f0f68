// Comparing logits with a reference JSON's top-10 lists ("llama-ref-dump/1", see
// shared/reference/README.md section 4): each listed logit within a tolerance, and the argmax
// equal to the reference top-1 wherever the reference's top1-top2 gap exceeds twice the tolerance.
// Failures are reported through gtest (the first 8 per Stats).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

namespace specula::test {

struct Stats {
    double max_diff = 0;
    int n_rows = 0;
    int n_argmax_checked = 0;
    int n_failures = 0;
};

// The reference's model block ("n_vocab", "n_embd", ...) against a loaded Model. `ref_extra`:
// elements the reference counts in n_params beyond the file's tensors (ik_llama.cpp counts a tied
// output matrix twice, and a tensor every layer shares, such as rope factors, once per layer).
// A file's nextn (MTP) layers count in the reference's n_layer (block_count), but ik_llama.cpp
// without MTP skips their tensors: not in its n_params.
template <class ModelT>
void expect_model_shape(const ModelT& model, const nlohmann::json& jm, int64_t ref_extra = 0) {
    const auto& hp = model.hparams();
    EXPECT_EQ(hp.n_vocab, jm["n_vocab"].get<int>());
    EXPECT_EQ(hp.n_embd, jm["n_embd"].get<int>());
    EXPECT_EQ(hp.n_layer + hp.n_nextn, jm["n_layer"].get<int>());
    EXPECT_EQ(hp.n_head, jm["n_head"].get<int>());
    EXPECT_EQ(hp.n_ctx_train, jm["n_ctx_train"].get<int>());
    int64_t nextn = 0;
    for (const auto& t : model.file().tensors()) {
        if (t.name.rfind("blk.", 0) == 0 && std::atoi(t.name.c_str() + 4) >= hp.n_layer)
            nextn += t.n_elements();
    }
    EXPECT_EQ(model.n_params() - nextn + ref_extra, jm["n_params"].get<int64_t>());
}

inline int argmax(const float* x, int n) {
    int best = 0;
    for (int i = 1; i < n; ++i) {
        if (x[i] > x[best]) best = i;
    }
    return best;
}

// Compares one row of our logits with a reference top-10 list.
inline void compare_row(const float* ours, int n_vocab, const nlohmann::json& top, double tol,
                        const std::string& where, Stats& st) {
    ++st.n_rows;
    for (const auto& pair : top) {
        const int id = pair[0].get<int>();
        const float ref = static_cast<float>(pair[1].get<double>());
        ASSERT_TRUE(id >= 0 && id < n_vocab) << where << ": reference id " << id;
        const double d = std::fabs(static_cast<double>(ours[id]) - ref);
        st.max_diff = std::max(st.max_diff, d);
        if (!(d <= tol)) {
            if (++st.n_failures <= 8) {
                ADD_FAILURE() << where << ", id " << id << ": ours " << ours[id] << " vs ref "
                              << ref << " (|diff| " << d << " > tol " << tol << ")";
            }
        }
    }
    const float gap =
        static_cast<float>(top[0][1].get<double>()) - static_cast<float>(top[1][1].get<double>());
    if (gap > 2 * tol) {
        ++st.n_argmax_checked;
        const int ref_top = top[0][0].get<int>();
        const int ours_top = argmax(ours, n_vocab);
        if (ours_top != ref_top && ++st.n_failures <= 8) {
            ADD_FAILURE() << where << ": our argmax " << ours_top << " != reference top-1 "
                          << ref_top << " (reference gap " << gap << ")";
        }
    }
}

}  // namespace specula::test
