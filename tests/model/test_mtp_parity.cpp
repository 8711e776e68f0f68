// The MTP (nextn) head against ik_llama.cpp's: tests/data/arch/mtp/<file>.k<K>.json hold its
// logits (scripts/models/mtp_ref_dump.cpp, through ik_llama.cpp's common/speculative MTP state),
// for the qwen35, qwen35moe and glm4moe random-weight files with one MTP layer, for K = 1, 2 and 3
// greedy drafts after each prompt of ../shared/reference/prompts/general.json.
//
// ik_llama.cpp warms its head over the prompt with MTP row j = [t_j, h_{j-1}] (zeros for row 0),
// one row more than Specula's own drafter feeds (row p = [t_{p+1}, h_p], speculative/
// mtp_drafter.h, as vLLM does; rope positions differ by one for all rows alike). To compare the
// head's arithmetic, this test feeds Specula's head ik_llama.cpp's rows through
// Session::eval_mtp: the warm-up rows, then draft row 1 = [t_n, h_{n-1}] and each further row =
// [the previous draft, the head's own output hidden]. Checked per prompt and K: the target's
// greedy t_n, every draft token (greedy, from our head's logits), and the top-10 logits of the
// last draft row within the F16 tolerance of the architecture parity tests.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "arch_parity.h"
#include "model/load/model.h"
#include "model/session.h"
#include "parity_util.h"
#include "test_util.h"

namespace {

using namespace specula;
using namespace specula::test;

void check_mtp_against_ik(const std::string& stem, int k) {
    SCOPED_TRACE(stem + " k=" + std::to_string(k));
    using json = nlohmann::json;
    const json ref =
        json::parse(read_file(kArchDataDir + "/mtp/" + stem + ".k" + std::to_string(k) + ".json"));
    ASSERT_EQ(ref["format"], "ik-mtp-dump/1");
    ASSERT_EQ(ref["k"].get<int>(), k);
    const auto model = Model::load(kArchDataDir + "/" + stem + ".gguf");
    ASSERT_TRUE(model->has_mtp());
    const int nv = model->hparams().n_vocab, d = model->hparams().n_embd;
    ASSERT_EQ(ref["n_vocab"].get<int>(), nv);
    constexpr double kTol = 0.03;  // F16 files, as arch_tolerance
    Stats st;
    ASSERT_GE(ref["prompts"].size(), 3u);
    for (const auto& p : ref["prompts"]) {
        const std::vector<token_id> toks = p["tokens"].get<std::vector<token_id>>();
        const int n = int(toks.size());
        ASSERT_GE(n, 2);
        SessionParams sp;
        sp.n_ctx = 512;
        sp.n_threads = 2;
        Session s(*model, sp);
        s.eval(toks);
        const token_id next = token_id(argmax(s.logits(n - 1), nv));
        EXPECT_EQ(next, p["next"].get<token_id>());
        // ik_llama.cpp's warm-up rows: [t_j, h_{j-1}], zeros for j = 0.
        std::vector<float> warm(size_t(n) * size_t(d), 0.0f);
        for (int j = 1; j < n; ++j)
            std::copy(s.hidden(j - 1), s.hidden(j - 1) + d, warm.begin() + size_t(j) * size_t(d));
        s.eval_mtp(toks, warm.data());
        // Draft row 1 from the target's last hidden state; each next row from the head's own.
        std::vector<float> h(s.hidden(n - 1), s.hidden(n - 1) + d);
        token_id in = next;
        const auto drafts = p["drafts"].get<std::vector<token_id>>();
        ASSERT_EQ(int(drafts.size()), k);
        for (int i = 0; i < k; ++i) {
            s.eval_mtp(std::span(&in, 1), h.data());
            const float* lg = s.mtp_logits(0);
            const token_id ours = token_id(argmax(lg, nv));
            EXPECT_EQ(ours, drafts[size_t(i)]) << "draft " << i + 1;
            if (i == k - 1) compare_row(lg, nv, p["last"], kTol, "last draft row", st);
            h.assign(s.mtp_hidden(0), s.mtp_hidden(0) + d);
            in = ours;
        }
    }
    std::printf("[mtp parity] %-44s k=%d rows %d max|d| %.3g\n", stem.c_str(), k, st.n_rows,
                st.max_diff);
    EXPECT_EQ(st.n_failures, 0);
}

TEST(MtpParity, Qwen35HeadMatchesIkLlamaCpp) {
    for (int k = 1; k <= 3; ++k) check_mtp_against_ik("rand-qwen35-mtp1-tok512-d128-l4-F16", k);
}

TEST(MtpParity, Qwen35MoeHeadMatchesIkLlamaCpp) {
    for (int k = 1; k <= 3; ++k)
        check_mtp_against_ik("rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16", k);
}

// glm4moe's head: plain attention with biases and Q/K norms, partial rope, the sigmoid-routed MoE
// with its ungated shared expert.
TEST(MtpParity, Glm4MoeHeadMatchesIkLlamaCpp) {
    for (int k = 1; k <= 3; ++k)
        check_mtp_against_ik("rand-glm4moe-mtp1-e8x2-tok512-d128-l3-F16", k);
}

}  // namespace
