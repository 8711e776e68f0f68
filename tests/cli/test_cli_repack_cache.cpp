// `--repack-cache DIR` through the commands (model/load/pack_cache.h; the cache itself is checked
// by tests/model/test_pack_cache.cpp): `run` writes one cache file per model (the target's and
// the draft model's) and a second run, mapping them, prints the same text as a run without the
// flag; `bench` maps the same files. A directory that cannot be written costs a warning naming
// it, not the run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_checks.h"
#include "cli_process.h"
#include "test_util.h"

namespace {

using specula::test::describe;
using specula::test::ProcResult;
using specula::test::run_specula;
using specula::test::shared_path;
namespace fs = std::filesystem;

const char* const kTarget = "models/synthetic/rand-llama-tok512-d256-l2-Q4_K_M.gguf";
const char* const kDraft = "models/synthetic/rand-llama-tok512-d256-l1-draft-Q8_0.gguf";

int packed_files(const fs::path& dir) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ".packed";
    return n;
}

TEST(CliRepackCache, RunWritesThenMapsTheSameText) {
    const fs::path dir = fs::path(testing::TempDir()) / "cli_repack_cache";
    fs::remove_all(dir);
    std::vector<std::string> args = {"run",
                                     "-m",
                                     shared_path(kTarget),
                                     "-md",
                                     shared_path(kDraft),
                                     "-p",
                                     "12 34 56",
                                     "-n",
                                     "24",
                                     "--temp",
                                     "0",
                                     "-t",
                                     "2"};
    const ProcResult plain = run_specula(args);
    ASSERT_EQ(plain.status, 0) << describe(plain);
    EXPECT_FALSE(plain.out.empty());
    args.insert(args.end(), {"--repack-cache", dir.string()});
    const ProcResult first = run_specula(args);
    ASSERT_EQ(first.status, 0) << describe(first);
    EXPECT_EQ(packed_files(dir), 2) << "one file for the target, one for the draft model";
    const ProcResult second = run_specula(args);
    ASSERT_EQ(second.status, 0) << describe(second);
    EXPECT_EQ(first.out, plain.out);
    EXPECT_EQ(second.out, plain.out);
    EXPECT_EQ(packed_files(dir), 2);

    const ProcResult bench =
        run_specula({"bench", "-m", shared_path(kTarget), "--no-spec", "-n", "4", "--pp", "8", "-r",
                     "1", "-t", "2", "--batches", "1", "--repack-cache", dir.string()});
    ASSERT_EQ(bench.status, 0) << describe(bench);
    EXPECT_EQ(packed_files(dir), 2);
    fs::remove_all(dir);
}

TEST(CliRepackCache, UnwritableDirectoryWarnsAndRuns) {
    const fs::path file = fs::path(testing::TempDir()) / "cli_repack_cache_file";
    std::ofstream(file) << "not a directory";
    const std::string dir = (file / "sub").string();
    const ProcResult r = run_specula({"run", "-m", shared_path(kTarget), "-p", "12 34", "-n", "4",
                                      "--temp", "0", "--repack-cache", dir});
    EXPECT_EQ(r.status, 0) << describe(r);
    EXPECT_NE(r.err.find("warning: --repack-cache: cannot write " + dir), std::string::npos)
        << r.err;
    fs::remove(file);
}

}  // namespace
