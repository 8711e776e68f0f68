// The benchmarks of src/bench/ on the tiny F16 synthetic pair: the draft-length sweep gives one
// row per configuration with consistent numbers, synthetic acceptance does what it says (A = 0:
// nothing accepted, A = 1: everything, A = 0.5: about half) and is clearly marked, the SVG plot is
// well formed, and the throughput table (pp, tg, pass costs, bandwidth) runs without a draft.
#include <gtest/gtest.h>

#include <cstdio>

#include "bench/plot.h"
#include "bench/sweep.h"
#include "common/error.h"
#include "model/load/model.h"
#include "test_util.h"

using namespace specula;

namespace {

BenchParams small(double synthetic) {
    BenchParams p;
    p.runtime.model_path = test::shared_path("models/synthetic/rand-llama-tok512-d256-l2-F16.gguf");
    p.runtime.speculative.method = SpecMethod::draft_model;
    p.runtime.speculative.draft_model =
        test::shared_path("models/synthetic/rand-llama-tok512-d256-l1-draft-F16.gguf");
    p.prompts = {"The quick brown fox jumps over the lazy dog."};
    p.n_predict = 24;
    p.reps = 1;
    p.draft_list = {1, 2, 4};
    p.runtime.n_threads = 1;
    p.synthetic_accept = synthetic;
    p.verbose = false;
    p.pp = 40;
    p.read_test_bytes = size_t{8} << 20;
    return p;
}

std::string table_of(const BenchResult& r, bool throughput = false) {
    const std::string path = test::temp_dir("bench") + "/table.txt";
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (throughput)
        print_throughput_table(r.tp, f);
    else
        print_bench_table(r, f);
    std::fclose(f);
    return test::read_file(path);
}

}  // namespace

TEST(SpecBench, RowsForPlainEachLengthAndAuto) {
    const BenchResult r = run_bench(small(-1));
    ASSERT_EQ(r.rows.size(), 5u);
    EXPECT_EQ(r.rows[0].label, "plain");
    EXPECT_EQ(r.rows[4].label, "auto");
    EXPECT_DOUBLE_EQ(r.rows[0].speedup, 1.0);
    for (const BenchRow& row : r.rows) {
        EXPECT_GT(row.median_tps, 0) << row.label;
        if (row.n_draft == 0) continue;
        // auto may decode plainly throughout (drafting loses on models this small): no drafts,
        // no acceptance to report.
        if (row.n_draft > 0) {
            EXPECT_GT(row.accept, 0.0) << row.label;
        }
        EXPECT_GE(row.accept, 0.0) << row.label;
        EXPECT_LE(row.accept, 1.0) << row.label;
        EXPECT_GE(row.mean_len, 1.0) << row.label;
        if (row.n_draft > 0) {
            EXPECT_LE(row.mean_len, row.n_draft + 1.0) << row.label;
        }
    }
    EXPECT_GT(r.a, 0.0);
    EXPECT_GT(r.c, 0.0);
    EXPECT_EQ(table_of(r).find("SYNTHETIC"), std::string::npos);

    const std::string svg = test::temp_dir("bench") + "/plot.svg";
    write_bench_svg(r, svg);
    const std::string text = test::read_file(svg);
    EXPECT_EQ(text.rfind("<svg", 0), 0u);
    EXPECT_NE(text.find("</svg>"), std::string::npos);
    EXPECT_NE(text.find("<polyline"), std::string::npos);
}

TEST(SpecBench, SyntheticAcceptanceIsAppliedAndMarked) {
    const BenchResult none = run_bench(small(0.0));
    const BenchResult all = run_bench(small(1.0));
    const BenchResult half = run_bench(small(0.5));
    for (size_t i = 1; i < none.rows.size(); ++i) {
        EXPECT_EQ(none.rows[i].accept, 0.0) << none.rows[i].label;
        EXPECT_EQ(all.rows[i].accept, 1.0) << all.rows[i].label;
    }
    EXPECT_NEAR(half.a, 0.5, 0.15);
    EXPECT_NE(table_of(half).find("SYNTHETIC ACCEPTANCE 0.50"), std::string::npos);
}

// --no-spec: only the plain row, plus the throughput figures (pp, tg, pass costs, bandwidth).
TEST(SpecBench, ThroughputWithoutDraft) {
    BenchParams p = small(-1);
    p.with_spec = false;
    p.runtime.speculative = {};  // no drafter
    p.pass_sizes = {1, 3, 5};
    const BenchResult r = run_bench(p);
    ASSERT_EQ(r.rows.size(), 1u);
    EXPECT_EQ(r.rows[0].label, "plain");
    const Throughput& tp = r.tp;
    EXPECT_GT(tp.pp_tps, 0.0);
    EXPECT_DOUBLE_EQ(tp.tg_tps, r.rows[0].median_tps);
    EXPECT_GT(tp.read_gbs, 0.0);
    EXPECT_EQ(tp.n_threads, 1);
    ASSERT_EQ(tp.passes.size(), 3u);
    EXPECT_EQ(tp.passes[0].batch, 1);
    EXPECT_DOUBLE_EQ(tp.passes[0].tau, 1.0);
    for (const PassRow& pr : tp.passes) {
        EXPECT_GT(pr.ms, 0.0) << pr.batch;
        // The median of each round's ratio to its own 1-token pass: not the ratio of the medians,
        // but on the same scale.
        EXPECT_GT(pr.tau, 0.25 * pr.ms / tp.passes[0].ms) << pr.batch;
        EXPECT_LT(pr.tau, 4.0 * pr.ms / tp.passes[0].ms) << pr.batch;
    }
    const std::string table = table_of(r, true);
    EXPECT_NE(table.find("| pp40"), std::string::npos) << table;
    EXPECT_NE(table.find("| tg24"), std::string::npos) << table;
    EXPECT_NE(table.find("| pass b=5"), std::string::npos) << table;
    EXPECT_NE(table.find("GB/s"), std::string::npos) << table;
    EXPECT_TRUE(tp.rollbacks.empty());
    EXPECT_EQ(table.find("recurrent rollback"), std::string::npos) << table;
}

// A hybrid model (qwen35: recurrent layers) also gets the rollback rows: its largest pass
// keeping 1 and b - 1 of its tokens, against the same pass without rollback support; a model
// without recurrent layers gets none (above: the llama file's table has no such line).
TEST(SpecBench, HybridModelGetsRecurrentRollbackRows) {
    BenchParams p = small(-1);
    p.runtime.model_path =
        std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/rand-qwen35-tok512-d128-l4-F16.gguf";
    p.with_spec = false;
    p.runtime.speculative = {};
    p.pass_sizes = {1, 5};
    p.pp = 0;
    const BenchResult r = run_bench(p);
    ASSERT_EQ(r.tp.rollbacks.size(), 2u);
    EXPECT_EQ(r.tp.rollbacks[0].keep, 1);
    EXPECT_EQ(r.tp.rollbacks[1].keep, 4);
    for (const RollbackRow& rr : r.tp.rollbacks) {
        EXPECT_EQ(rr.batch, 5);
        EXPECT_GT(rr.ms, 0.0);
        EXPECT_GT(rr.base_ms, 0.0);
        EXPECT_NEAR(rr.ratio, rr.ms / rr.base_ms, 1e-9);
    }
    const std::string table = table_of(r, true);
    EXPECT_NE(table.find("recurrent rollback: pass b=5 keeping 4 of 5"), std::string::npos)
        << table;
}

TEST(SpecBench, NeedsADraftOnlyForSpeculativeRows) {
    BenchParams p = small(-1);
    p.runtime.speculative = {};  // no drafter
    EXPECT_THROW(run_bench(p), Error);
    p.pass_sizes = {0};
    p.with_spec = false;
    EXPECT_THROW(run_bench(p), Error);
}

// --depth: every figure sits on a shared filler of `depth` cached positions, here past the
// model's training context (2048), so the sessions must be sized for it; the filler is
// evaluated once per session and kept (the whole run stays fast).
TEST(SpecBench, DepthRunsEverythingOnTopOfACachedFiller) {
    BenchParams p = small(-1);
    p.depth = 2500;
    p.runtime.type_k = KVType::Q8_0;
    p.runtime.type_v = KVType::F16;
    p.draft_list = {3};
    p.with_auto = false;
    p.pass_sizes = {1, 5};
    const BenchResult r = run_bench(p);
    ASSERT_EQ(r.rows.size(), 2u);
    for (const BenchRow& row : r.rows) EXPECT_GT(row.median_tps, 0.0) << row.label;
    EXPECT_EQ(r.tp.depth, 2500);
    ASSERT_EQ(r.tp.passes.size(), 2u);
    EXPECT_GT(r.tp.passes[1].ms, 0.0);
    EXPECT_GT(r.tp.pp_tps, 0.0);
    const std::string table = table_of(r, true);
    // The read figures count the KV rows a pass reads at that depth: every layer's 2500 rows of
    // K (Q8_0: 34 bytes per 32 values) and V (F16: 2 bytes a value).
    const HParams hp = Model::load(p.runtime.model_path)->hparams();
    EXPECT_EQ(r.tp.kv_bytes,
              int64_t(hp.n_layer) * 2500 * (hp.n_embd_kv() / 32 * 34 + hp.n_embd_kv() * 2));
    EXPECT_NE(table.find(" of KV at depth 2500 per pass"), std::string::npos) << table;
    p.depth = -1;
    EXPECT_THROW(run_bench(p), Error);
}

// --draft-min reaches bench as it reaches run and serve (runtime/runtime.h's gen_params): with
// every draft length below it no proposal is verified, so nothing is drafted even where every
// drafted token would be accepted (synthetic acceptance 1); without it everything drafted is.
TEST(SpecBench, HonoursDraftMin) {
    BenchParams p = small(1.0);
    p.with_auto = false;
    p.pp = 0;
    p.read_test_bytes = 0;
    const BenchResult with_drafts = run_bench(p);
    p.runtime.speculative.draft_min = 5;  // above every length of draft_list {1, 2, 4}
    const BenchResult none = run_bench(p);
    ASSERT_EQ(with_drafts.rows.size(), 4u);
    ASSERT_EQ(none.rows.size(), 4u);
    for (size_t i = 1; i < none.rows.size(); ++i) {
        EXPECT_GT(with_drafts.rows[i].mean_len, 1.5) << with_drafts.rows[i].label;
        EXPECT_DOUBLE_EQ(none.rows[i].accept, 0.0) << none.rows[i].label;
        EXPECT_DOUBLE_EQ(none.rows[i].mean_len, 1.0) << none.rows[i].label;
    }
}

// -c: 0 is the model's training context, as in run and serve; not given, the default (the
// training context, at most 4096); a -c smaller than --depth needs is an Error naming both.
TEST(SpecBench, ContextFollowsTheRuntimeRule) {
    BenchParams p = small(-1);
    p.with_spec = false;
    p.runtime.speculative = {};
    p.pass_sizes = {1};
    p.pp = 0;
    p.read_test_bytes = 0;
    p.runtime.n_ctx = 0;
    EXPECT_NO_THROW(run_bench(p));
    p.depth = 100;
    p.runtime.n_ctx = 64;
    try {
        run_bench(p);
        ADD_FAILURE() << "a -c below what --depth needs ran";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("-c 64 is smaller than --depth 100"),
                  std::string::npos)
            << e.what();
    }
}
