// The benchmark driver (spec/bench.h) on the tiny F16 synthetic pair: one row per configuration
// with consistent numbers, synthetic acceptance doing what it says (A = 0: nothing accepted,
// A = 1: everything, A = 0.5: about half) and clearly marked, and a well-formed SVG plot.
#include <gtest/gtest.h>

#include <cstdio>

#include "spec/bench.h"
#include "test_util.h"

using namespace specula;

namespace {

BenchParams small(double synthetic) {
    BenchParams p;
    p.target_path = test::shared_path("models/synthetic/rand-llama-tok512-d256-l2-F16.gguf");
    p.draft_path = test::shared_path("models/synthetic/rand-llama-tok512-d256-l1-draft-F16.gguf");
    p.prompts = {"The quick brown fox jumps over the lazy dog."};
    p.n_predict = 24;
    p.reps = 1;
    p.draft_list = {1, 2, 4};
    p.n_threads = 1;
    p.synthetic_accept = synthetic;
    p.verbose = false;
    return p;
}

std::string table_of(const BenchResult& r) {
    const std::string path = test::temp_dir("bench") + "/table.txt";
    std::FILE* f = std::fopen(path.c_str(), "w");
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
        EXPECT_GT(row.accept, 0.0) << row.label;
        EXPECT_LE(row.accept, 1.0) << row.label;
        EXPECT_GE(row.mean_len, 1.0) << row.label;
        if (row.n_draft > 0) EXPECT_LE(row.mean_len, row.n_draft + 1.0) << row.label;
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
