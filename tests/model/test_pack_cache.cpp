// --repack-cache (model/load/pack_cache.h): the first load with a cache directory packs and writes
// one file, a later load maps it and packs nothing, and both give the logits of a load without a
// cache bit for bit, their packed bytes equal; a cache that is cut short or whose header is
// changed is not used (the load packs and writes it again); a directory that cannot be written
// costs the cache, not the load; a changed model file's old cache is removed. On a dense Q4_K_M /
// Q6_K file, a tied-embedding Q8_0 file (the output packed from the embedding's rows) and a MoE
// file (stacked experts packed).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "model/load/model.h"
#include "model/session.h"
#include "test_util.h"

using namespace specula;
namespace fs = std::filesystem;

namespace {

std::vector<float> last_logits(const Model& m) {
    Session s(m, SessionParams{64, 2});
    std::vector<token_id> prompt;
    for (int i = 0; i < 12; ++i) prompt.push_back((7 * i + 3) % m.hparams().n_vocab);
    s.eval(prompt, false);
    return {s.logits(0), s.logits(0) + m.hparams().n_vocab};
}

std::vector<fs::path> cache_files(const fs::path& dir) {
    std::vector<fs::path> r;
    if (!fs::exists(dir)) return r;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".packed") r.push_back(e.path());
    return r;
}

class PackCache : public testing::TestWithParam<const char*> {};

TEST_P(PackCache, MappedEqualsPacked) {
    const std::string path = test::shared_path(GetParam());
    const fs::path dir = fs::path(testing::TempDir()) / "pack_cache" / fs::path(path).stem();
    fs::remove_all(dir);
    const auto plain = Model::load(path);
    ASSERT_FALSE(plain->packed.empty()) << "the file has packed matrices";
    const std::vector<float> want = last_logits(*plain);

    const auto first = Model::load(path, LoadOptions{.repack_cache = dir.string()});
    EXPECT_EQ(first->packed_file, nullptr);
    const auto files = cache_files(dir);
    ASSERT_EQ(files.size(), 1u);
    EXPECT_EQ(last_logits(*first), want);

    const auto second = Model::load(path, LoadOptions{.repack_cache = dir.string()});
    ASSERT_NE(second->packed_file, nullptr) << "the cache was not mapped";
    EXPECT_TRUE(second->packed.empty()) << "packed again";
    EXPECT_EQ(last_logits(*second), want);
    const WeightView& a = first->layers[0].ffn_down;
    const WeightView& b = second->layers[0].ffn_down;
    if (a.packed) {
        ASSERT_NE(b.packed, nullptr);
        EXPECT_EQ(std::memcmp(a.packed, b.packed, packed_size(a)), 0);
    }
    ASSERT_NE(plain->output.packed, nullptr);
    EXPECT_EQ(std::memcmp(plain->output.packed, second->output.packed, packed_size(plain->output)),
              0);

    // Cut short, or another key in the header: packed again, and the file written whole again.
    const auto size = fs::file_size(files[0]);
    fs::resize_file(files[0], size / 2);
    {
        const auto again = Model::load(path, LoadOptions{.repack_cache = dir.string()});
        EXPECT_EQ(again->packed_file, nullptr);
        EXPECT_EQ(last_logits(*again), want);
    }
    EXPECT_EQ(fs::file_size(files[0]), size);
    {
        std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(8);
        f.put('\x5a');
    }
    {
        const auto again = Model::load(path, LoadOptions{.repack_cache = dir.string()});
        EXPECT_EQ(again->packed_file, nullptr);
        EXPECT_EQ(last_logits(*again), want);
    }
    const auto mapped = Model::load(path, LoadOptions{.repack_cache = dir.string()});
    EXPECT_NE(mapped->packed_file, nullptr);
    EXPECT_EQ(last_logits(*mapped), want);
    EXPECT_EQ(cache_files(dir).size(), 1u);
    fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Files, PackCache,
    testing::Values("models/synthetic/rand-llama-tok512-d256-l2-Q4_K_M.gguf",
                    "models/synthetic/rand-llama-llama3vocab-d64-l1-tied-Q8_0.gguf",
                    "models/synthetic/rand-llama-moe4x2-tok512-d256-l2-Q8_0.gguf"));

// A model file that changes (re-downloaded, re-quantized: here its modification time) is packed
// again under a new key and its old cache removed; a file of the same name in another folder
// keeps its own.
TEST(PackCacheDir, ChangedFileReplacesItsOldCache) {
    const std::string src =
        test::shared_path("models/synthetic/rand-llama-tok512-d256-l2-Q8_0.gguf");
    const fs::path root = fs::path(testing::TempDir()) / "pack_cache_stale";
    fs::remove_all(root);
    const fs::path a = root / "a" / "model.gguf", b = root / "b" / "model.gguf";
    const fs::path dir = root / "cache";
    for (const fs::path& p : {a, b}) {
        fs::create_directories(p.parent_path());
        fs::copy_file(src, p);
    }
    const LoadOptions opts{.repack_cache = dir.string()};
    Model::load(a.string(), opts);
    Model::load(b.string(), opts);
    const auto before = cache_files(dir);
    ASSERT_EQ(before.size(), 2u) << "one cache per model file path";

    fs::last_write_time(a, fs::last_write_time(a) + std::chrono::hours(1));
    const auto changed = Model::load(a.string(), opts);
    EXPECT_EQ(changed->packed_file, nullptr) << "a changed file maps no old cache";
    const auto after = cache_files(dir);
    ASSERT_EQ(after.size(), 2u) << "the old cache of a was not removed";
    int kept = 0;
    for (const fs::path& f : after) kept += std::count(before.begin(), before.end(), f);
    EXPECT_EQ(kept, 1) << "b's cache stays, a's is a new file";
    EXPECT_NE(Model::load(a.string(), opts)->packed_file, nullptr);
    EXPECT_NE(Model::load(b.string(), opts)->packed_file, nullptr);
    fs::remove_all(root);
}

TEST(PackCacheDir, UnwritableDirectoryCostsOnlyTheCache) {
    const std::string path =
        test::shared_path("models/synthetic/rand-llama-tok512-d256-l2-Q8_0.gguf");
    const fs::path file = fs::path(testing::TempDir()) / "pack_cache_not_a_dir";
    std::ofstream(file) << "a file, not a directory";
    const auto m = Model::load(path, LoadOptions{.repack_cache = (file / "sub").string()});
    EXPECT_EQ(m->packed_file, nullptr);
    EXPECT_EQ(last_logits(*m), last_logits(*Model::load(path)));
    fs::remove(file);
}

}  // namespace
