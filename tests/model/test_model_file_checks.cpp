// Model files that contradict themselves are refused at load, naming the file and the key or
// tensor (model/load/file_checks.h, issue #45): mutated copies of ../shared models written to a
// temporary folder with the GGUF writer. A block_count one too small (a layer past it) or one
// too large (a layer without tensors), nextn_predict_layers without nextn tensors and nextn
// tensors without the key, rope numbers that are not finite or <= 0 where scaling asks for them,
// rope-factor tensor values of 0; --check-tensors (LoadOptions::check_tensors) finds a NaN block
// in every weight type of the synthetic models and passes them all when clean.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf_writer.h"
#include "model/load/model.h"
#include "test_util.h"

namespace {

using specula::GGUFFile;
using specula::GGUFWriter;
using specula::LoadOptions;
using specula::Model;
using specula::test::shared_path;

const std::string kStories = "models/tinystories/stories260K.gguf";

// `rel` (under ../shared) copied with `mutate` applied, written to a temporary file.
std::string mutated(const std::string& rel, const std::string& name,
                    const std::function<void(GGUFWriter&, const GGUFFile&)>& mutate) {
    const auto src = GGUFFile::open(shared_path(rel));
    GGUFWriter w;
    w.copy_from(*src);
    mutate(w, *src);
    const std::string path = specula::test::temp_dir("file-checks") + "/" + name + ".gguf";
    w.write(path);
    return path;
}

// `rel` copied with the data of tensor `tensor` changed by `change`; `type` gets its type name.
std::string tensor_mutated(const std::string& rel, const std::string& name,
                           const std::string& tensor, std::string& type) {
    const auto src = GGUFFile::open(shared_path(rel));
    GGUFWriter w;
    for (const auto& [k, v] : src->metadata()) w.set(k, v);
    for (const specula::GGUFTensor& t : src->tensors()) {
        std::vector<uint8_t> data(t.data, t.data + t.nbytes);
        if (t.name == tensor) {  // its first block all 0xFF: NaN scales (or NaN values)
            type = std::string(specula::type_name(t.type));
            std::memset(data.data(), 0xFF, specula::type_traits(t.type).type_size);
        }
        w.add_tensor(t.name, t.ne, t.type, data.data(), data.size());
    }
    const std::string path = specula::test::temp_dir("file-checks") + "/" + name + ".gguf";
    w.write(path);
    return path;
}

// The error Model::load gives, "" when it loads.
std::string load_error(const std::string& path, bool check_tensors = false) {
    LoadOptions o;
    o.n_threads = 2;
    o.repack = false;
    o.check_tensors = check_tensors;
    try {
        Model::load(path, o);
    } catch (const specula::Error& e) {
        return e.what();
    }
    return "";
}

void expect_refused(const std::string& path, const std::vector<std::string>& words) {
    const std::string e = load_error(path);
    ASSERT_FALSE(e.empty()) << path << " loaded";
    EXPECT_NE(e.find(path), std::string::npos) << e;
    for (const auto& w : words)
        EXPECT_NE(e.find(w), std::string::npos) << "no '" << w << "' in: " << e;
}

TEST(ModelFileChecks, TheUnmutatedModelLoads) {
    EXPECT_EQ(load_error(mutated(kStories, "same", [](GGUFWriter&, const GGUFFile&) {})), "");
}

TEST(ModelFileChecks, BlockCountTooSmallNamesTheLayerPastIt) {
    const std::string p = mutated(kStories, "bc-small", [](GGUFWriter& w, const GGUFFile& f) {
        w.set_u32("llama.block_count", uint32_t(f.get_int("llama.block_count") - 1));
    });
    expect_refused(p, {"llama.block_count' = 4", "belongs to layer 4", "blk.4."});
}

TEST(ModelFileChecks, BlockCountTooLargeNamesTheEmptyLayer) {
    const std::string p = mutated(kStories, "bc-large", [](GGUFWriter& w, const GGUFFile& f) {
        w.set_u32("llama.block_count", uint32_t(f.get_int("llama.block_count") + 1));
    });
    expect_refused(p, {"layer 5 has no tensors", "llama.block_count' = 6"});
}

TEST(ModelFileChecks, NextnCountMustMatchTheNextnTensors) {
    const std::string no_tensors =
        mutated(kStories, "nextn-key",
                [](GGUFWriter& w, const GGUFFile&) { w.set_u32("llama.nextn_predict_layers", 1); });
    expect_refused(no_tensors, {"llama.nextn_predict_layers' = 1", "no layer has nextn tensors"});
    const std::string no_key =
        mutated(kStories, "nextn-tensor", [](GGUFWriter& w, const GGUFFile& f) {
            const int64_t d = f.get_int("llama.embedding_length");
            std::vector<float> ones(size_t(d), 1.f);
            w.add_tensor("blk.4.nextn.enorm.weight", {d}, specula::GGMLType::F32, ones.data(),
                         ones.size() * 4);
        });
    expect_refused(no_key,
                   {"llama.nextn_predict_layers' = 0 (absent", "nextn tensors are in layer 4"});
}

TEST(ModelFileChecks, RopeNumbersMustBeFiniteAndPositive) {
    const float inf = std::numeric_limits<float>::infinity();
    expect_refused(mutated(kStories, "rope-beta",
                           [&](GGUFWriter& w, const GGUFFile&) {
                               w.set_f32("llama.rope.scaling.yarn_beta_fast", inf);
                           }),
                   {"llama.rope.scaling.yarn_beta_fast", "not a finite number"});
    expect_refused(mutated(kStories, "rope-factor",
                           [](GGUFWriter& w, const GGUFFile&) {
                               w.set_string("llama.rope.scaling.type", "linear");
                               w.set_f32("llama.rope.scaling.factor", 0.f);
                           }),
                   {"llama.rope.scaling.factor' = 0 must be > 0", "linear"});
    expect_refused(
        mutated(kStories, "rope-base",
                [](GGUFWriter& w, const GGUFFile&) { w.set_f32("llama.rope.freq_base", 0.f); }),
        {"llama.rope.freq_base"});
    // No type and a factor of 0 is "no scaling", as llama.cpp reads it.
    EXPECT_EQ(load_error(mutated(kStories, "rope-none",
                                 [](GGUFWriter& w, const GGUFFile&) {
                                     w.set_f32("llama.rope.scaling.factor", 0.f);
                                 })),
              "");
}

TEST(ModelFileChecks, RopeFactorTensorValuesMustBePositive) {
    const std::string p = mutated(kStories, "rope-freqs", [](GGUFWriter& w, const GGUFFile& f) {
        const int64_t head =
            f.get_int("llama.embedding_length") / f.get_int("llama.attention.head_count");
        std::vector<float> v(size_t(head / 2), 1.f);
        v[3] = 0.f;
        w.add_tensor("rope_freqs.weight", {head / 2}, specula::GGMLType::F32, v.data(),
                     v.size() * 4);
    });
    expect_refused(p, {"rope_freqs.weight' value 3 = 0", "finite and > 0"});
}

// Every weight type of the synthetic models: clean, they pass --check-tensors; with the first
// block of blk.0.attn_q.weight all 0xFF bytes (a NaN scale, or NaN values), it is refused,
// naming the tensor, its type and row 0, and without the flag the file still loads.
TEST(ModelFileChecks, CheckTensorsFindsANaNBlockInEveryType) {
    const char* files[] = {
        "rand-llama-tok512-d256-l2-F32.gguf",    "rand-llama-tok512-d256-l2-F16.gguf",
        "rand-llama-tok512-d256-l2-BF16.gguf",   "rand-llama-tok512-d256-l2-Q4_0.gguf",
        "rand-llama-tok512-d256-l2-Q4_1.gguf",   "rand-llama-tok512-d256-l2-Q5_0.gguf",
        "rand-llama-tok512-d256-l2-Q5_1.gguf",   "rand-llama-tok512-d256-l2-Q8_0.gguf",
        "rand-llama-tok512-d256-l2-Q2_K.gguf",   "rand-llama-tok512-d256-l2-Q3_K_M.gguf",
        "rand-llama-tok512-d256-l2-Q4_K_M.gguf", "rand-llama-tok512-d256-l2-Q5_K_M.gguf",
        "rand-llama-tok512-d256-l2-Q6_K.gguf",   "rand-llama-tok512-d256-l2-IQ4_NL.gguf",
        "rand-llama-tok512-d256-l2-IQ4_XS.gguf",
    };
    for (const char* name : files) {
        SCOPED_TRACE(name);
        const std::string rel = std::string("models/synthetic/") + name;
        EXPECT_EQ(load_error(shared_path(rel), true), "");
        std::string type;
        const std::string p =
            tensor_mutated(rel, std::string("nan-") + name, "blk.0.attn_q.weight", type);
        EXPECT_EQ(load_error(p), "");
        const std::string e = load_error(p, true);
        EXPECT_NE(e.find("tensor 'blk.0.attn_q.weight' (" + type + ") holds NaN at row 0"),
                  std::string::npos)
            << e;
        EXPECT_NE(e.find("--check-tensors"), std::string::npos) << e;
    }
}

}  // namespace
