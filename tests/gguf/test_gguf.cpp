// GGUF reader/writer tests: every shipped file loads and matches MANIFEST.json, the v1 and v3
// stories260K files hold identical tensors, the writer round-trips every value type, and a table
// of corrupted files (plus byte flips and truncations at every header offset) is rejected with a
// specula::Error whose message names the defect.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace specula;
using Bytes = std::vector<uint8_t>;

namespace {

// ---------------------------------------------------------------------------------------------
// Helpers

// Writes a fresh file (removing any old one first: truncating a file in place makes ext4 flush it
// to disk on close, which made the fuzz loop slow).
void write_bytes(const std::string& path, const Bytes& b) {
    fs::remove(path);
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// Deep equality of two metadata values (type, payload, elements).
bool same_value(const GGUFValue& a, const GGUFValue& b) {
    if (a.type != b.type) return false;
    switch (a.type) {
        case GGUFType::STRING:
            return a.s == b.s;
        case GGUFType::BOOL:
            return a.b == b.b;
        case GGUFType::FLOAT32:
        case GGUFType::FLOAT64:
            return std::memcmp(&a.f, &b.f, sizeof(double)) == 0;
        case GGUFType::ARRAY:
            if (a.elem_type != b.elem_type || a.arr.size() != b.arr.size()) return false;
            for (size_t k = 0; k < a.arr.size(); ++k) {
                if (!same_value(a.arr[k], b.arr[k])) return false;
            }
            return true;
        default:
            return a.u == b.u && a.i == b.i;
    }
}

void expect_same_tensors(const GGUFFile& a, const GGUFFile& b) {
    ASSERT_EQ(a.tensors().size(), b.tensors().size());
    for (size_t k = 0; k < a.tensors().size(); ++k) {
        const GGUFTensor& ta = a.tensors()[k];
        const GGUFTensor* tb = b.find_tensor(ta.name);
        ASSERT_NE(tb, nullptr) << ta.name;
        EXPECT_EQ(ta.ne, tb->ne) << ta.name;
        EXPECT_EQ(ta.type, tb->type) << ta.name;
        ASSERT_EQ(ta.nbytes, tb->nbytes) << ta.name;
        EXPECT_EQ(std::memcmp(ta.data, tb->data, ta.nbytes), 0) << ta.name;
    }
}

// The manifest entry (models/ or vocab/ list) for a path relative to shared/.
const nlohmann::json* manifest_entry(const nlohmann::json& m, const std::string& rel) {
    for (const auto* list : {&m["files"], &m["vocab"]["files"]}) {
        for (const auto& e : *list) {
            if (e["path"] == rel) return &e;
        }
    }
    return nullptr;
}

std::vector<std::string> gguf_files_under(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
        if (e.is_regular_file() && e.path().extension() == ".gguf") out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
}

// ---------------------------------------------------------------------------------------------
// Shipped files

TEST(GGUF, LoadsEveryShippedFileAndMatchesManifest) {
    const std::string shared = test::shared_dir();
    auto manifest =
        nlohmann::json::parse(test::read_file(test::shared_path("models/MANIFEST.json")));
    std::vector<std::string> files = gguf_files_under(test::shared_path("models"));
    size_t n_models = files.size();
    for (const auto& f : gguf_files_under(test::shared_path("vocab"))) files.push_back(f);
    EXPECT_GE(n_models, 27u);
    EXPECT_GE(files.size() - n_models, 12u);
    size_t n_listed = 0;  // every .gguf the manifest lists is on disk (and was found above)
    for (const auto* list : {&manifest["files"], &manifest["vocab"]["files"]}) {
        for (const auto& e : *list) {
            if (e["path"].get<std::string>().ends_with(".gguf")) ++n_listed;
        }
    }
    EXPECT_EQ(n_listed, files.size());

    for (const std::string& path : files) {
        SCOPED_TRACE(path);
        const std::string rel = fs::relative(path, shared).string();
        const nlohmann::json* entry = manifest_entry(manifest, rel);
        ASSERT_NE(entry, nullptr) << "not in MANIFEST.json: " << rel;
        auto f = GGUFFile::open(path);
        EXPECT_EQ(f->file_size(), (*entry)["bytes"].get<uint64_t>());
        EXPECT_EQ(f->data_offset() % f->alignment(), 0u);
        for (const GGUFTensor& t : f->tensors()) {
            EXPECT_LE(f->data_offset() + t.offset + t.nbytes, f->file_size()) << t.name;
            EXPECT_EQ(t.nbytes, row_size(t.type, t.ne[0]) * t.n_rows()) << t.name;
        }
        if ((*entry)["kind"] != "model") {
            EXPECT_TRUE(f->tensors().empty());
            EXPECT_FALSE(f->get_string_array("tokenizer.ggml.tokens").empty());
            continue;
        }
        EXPECT_EQ(f->version(), (*entry)["gguf_version"].get<uint32_t>());
        EXPECT_EQ(f->get_string("general.architecture"), (*entry)["arch"].get<std::string>());
        EXPECT_EQ(f->get_string("general.name"), (*entry)["general.name"].get<std::string>());
        EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(),
                  (*entry)["vocab"]["n_tokens"].get<size_t>());
        std::map<std::string, int> counts;
        for (const GGUFTensor& t : f->tensors()) counts[std::string(type_name(t.type))]++;
        std::map<std::string, int> expect;
        for (auto& [type, n] : (*entry)["quant"]["tensor_types"].items()) expect[type] = n;
        EXPECT_EQ(counts, expect);
    }
}

TEST(GGUF, StoriesV1AndV3HoldIdenticalTensorsAndMetadata) {
    auto v1 = GGUFFile::open(test::shared_path("models/tinystories/stories260K-ggufv1.gguf"));
    auto v3 = GGUFFile::open(test::shared_path("models/tinystories/stories260K.gguf"));
    EXPECT_EQ(v1->version(), 1u);
    EXPECT_EQ(v3->version(), 3u);
    EXPECT_EQ(v1->tensors().size(), 48u);
    expect_same_tensors(*v1, *v3);
    // v3 = v1 metadata plus general.file_type.
    for (const auto& [key, value] : v1->metadata()) {
        const GGUFValue* other = v3->find(key);
        ASSERT_NE(other, nullptr) << key;
        EXPECT_TRUE(same_value(value, *other)) << key;
    }
    EXPECT_EQ(v3->metadata().size(), v1->metadata().size() + 1);
    EXPECT_EQ(v3->get_int("general.file_type"), 0);
    EXPECT_EQ(v1->get_int("llama.embedding_length"), 64);
    EXPECT_EQ(v1->get_int_array("tokenizer.ggml.token_type").size(), 512u);
}

TEST(GGUF, GettersConvertAndNameTheKeyOnWrongType) {
    auto f = GGUFFile::open(test::shared_path("models/tinystories/stories260K.gguf"));
    EXPECT_EQ(f->get_int("llama.block_count"), 5);
    EXPECT_EQ(f->get_int_or("no.such.key", -7), -7);
    EXPECT_NEAR(f->get_float_or("llama.attention.layer_norm_rms_epsilon", 0), 1e-5, 1e-12);
    EXPECT_EQ(f->get_float_or("llama.block_count", 0), 5.0);  // ints convert to float
    EXPECT_EQ(f->get_string_or("no.such.key", "dflt"), "dflt");
    EXPECT_TRUE(f->get_string_array("no.such.key").empty());
    EXPECT_EQ(f->get_float_array("tokenizer.ggml.token_type").size(), 512u);  // i32 -> float
    EXPECT_EQ(f->get_float_array("tokenizer.ggml.scores").size(), 512u);
    EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens")[1], "<s>");
    EXPECT_EQ(f->tensor("token_embd.weight").ne, (std::vector<int64_t>{64, 512}));

    auto expect_error = [](const std::function<void()>& fn, const std::string& needle) {
        try {
            fn();
            ADD_FAILURE() << "no Error thrown, expected one containing '" << needle << "'";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    expect_error([&] { f->get_int("general.architecture"); }, "general.architecture");
    expect_error([&] { f->get_string("llama.block_count"); }, "llama.block_count");
    expect_error([&] { f->get_string("no.such.key"); }, "no.such.key");
    expect_error([&] { f->get_bool_or("llama.block_count", false); }, "llama.block_count");
    expect_error([&] { f->get_string_array("tokenizer.ggml.scores"); }, "tokenizer.ggml.scores");
    expect_error([&] { f->get_int_array("tokenizer.ggml.tokens"); }, "tokenizer.ggml.tokens");
    expect_error([&] { f->get_float_array("tokenizer.ggml.tokens"); }, "tokenizer.ggml.tokens");
    expect_error([&] { f->tensor("nope.weight"); }, "missing tensor nope.weight");
}

// ---------------------------------------------------------------------------------------------
// Writer

GGUFValue scalar_value(GGUFType t) {
    GGUFValue v;
    v.type = t;
    return v;
}

// A writer holding one key of every value type, including nested and empty arrays.
void add_every_value_type(GGUFWriter& w) {
    const std::pair<GGUFType, uint64_t> uints[] = {{GGUFType::UINT8, 200},
                                                   {GGUFType::UINT16, 60000},
                                                   {GGUFType::UINT32, 4000000000u},
                                                   {GGUFType::UINT64, 1ull << 62}};
    for (auto [t, x] : uints) {
        GGUFValue v = scalar_value(t);
        v.u = x;
        w.set("test." + std::string(gguf_type_name(t)), v);
    }
    const std::pair<GGUFType, int64_t> ints[] = {{GGUFType::INT8, -100},
                                                 {GGUFType::INT16, -30000},
                                                 {GGUFType::INT32, -2000000000},
                                                 {GGUFType::INT64, -(1LL << 62)}};
    for (auto [t, x] : ints) {
        GGUFValue v = scalar_value(t);
        v.i = x;
        w.set("test." + std::string(gguf_type_name(t)), v);
    }
    GGUFValue f64 = scalar_value(GGUFType::FLOAT64);
    f64.f = 3.141592653589793;
    w.set("test.f64", f64);
    w.set_f32("test.f32", 0.25f);
    w.set_bool("test.bool", true);
    w.set_string("test.string", std::string("with\0nul and utf8 \xc3\xa9", 20));
    w.set_string_array("test.strings", {"a", "", "ccc"});
    w.set_f32_array("test.floats", {1.5f, -2.0f});
    w.set_i32_array("test.ints", {});
    GGUFValue nested = scalar_value(GGUFType::ARRAY);
    nested.elem_type = GGUFType::ARRAY;
    for (int k = 0; k < 2; ++k) {
        GGUFValue inner = scalar_value(GGUFType::ARRAY);
        inner.elem_type = GGUFType::UINT16;
        for (int j = 0; j <= k; ++j) {
            GGUFValue e = scalar_value(GGUFType::UINT16);
            e.u = 10 * k + j;
            inner.arr.push_back(e);
        }
        nested.arr.push_back(inner);
    }
    w.set("test.nested", nested);
}

TEST(GGUFWriter, RoundTripsRealModelAndEveryValueTypeInAllVersions) {
    auto src =
        GGUFFile::open(test::shared_path("models/synthetic/rand-llama-tok512-d256-l2-Q4_K_M.gguf"));
    const std::string dir = test::temp_dir("gguf-roundtrip");
    for (uint32_t version : {1u, 2u, 3u}) {
        SCOPED_TRACE(version);
        GGUFWriter w(version);
        w.copy_from(*src);
        add_every_value_type(w);
        const std::string path = dir + "/rt-v" + std::to_string(version) + ".gguf";
        w.write(path);
        auto back = GGUFFile::open(path);
        EXPECT_EQ(back->version(), version);
        expect_same_tensors(*src, *back);
        ASSERT_EQ(back->metadata().size(), src->metadata().size() + 16);
        for (size_t k = 0; k < src->metadata().size(); ++k) {
            EXPECT_EQ(back->metadata()[k].first, src->metadata()[k].first);
            EXPECT_TRUE(same_value(back->metadata()[k].second, src->metadata()[k].second));
        }
        EXPECT_EQ(back->get_int("test.u8"), 200);
        EXPECT_EQ(back->get_int("test.i8"), -100);
        EXPECT_EQ(back->get_int("test.u32"), 4000000000LL);
        EXPECT_EQ(back->get_int("test.i64"), -(1LL << 62));
        EXPECT_EQ(back->get_float_or("test.f64", 0), 3.141592653589793);
        EXPECT_EQ(back->get_float_or("test.f32", 0), 0.25);
        EXPECT_TRUE(back->get_bool_or("test.bool", false));
        EXPECT_EQ(back->get_string("test.string"), std::string("with\0nul and utf8 \xc3\xa9", 20));
        EXPECT_EQ(back->get_string_array("test.strings"),
                  (std::vector<std::string>{"a", "", "ccc"}));
        EXPECT_EQ(back->get_float_array("test.floats"), (std::vector<float>{1.5f, -2.0f}));
        EXPECT_TRUE(back->get_int_array("test.ints").empty());
        const GGUFValue* nested = back->find("test.nested");
        ASSERT_NE(nested, nullptr);
        ASSERT_EQ(nested->arr.size(), 2u);
        EXPECT_EQ(nested->arr[1].arr[1].u, 11u);
        // Writing what was read gives the same bytes again.
        GGUFWriter again(version);
        again.copy_from(*back);
        const std::string written = test::read_file(path);
        EXPECT_EQ(again.to_bytes(), Bytes(written.begin(), written.end()));
    }
}

TEST(GGUFWriter, HonoursAlignmentAndRejectsBadTensors) {
    auto src = GGUFFile::open(test::shared_path("models/tinystories/stories260K.gguf"));
    GGUFWriter w;
    w.set_u32("general.alignment", 256);
    w.copy_from(*src);
    const std::string path = test::temp_dir("gguf-align") + "/aligned.gguf";
    w.write(path);
    auto back = GGUFFile::open(path);
    EXPECT_EQ(back->alignment(), 256u);
    EXPECT_EQ(back->data_offset() % 256, 0u);
    EXPECT_EQ(back->file_size() % 256, 0u);
    for (const GGUFTensor& t : back->tensors()) EXPECT_EQ(t.offset % 256, 0u) << t.name;
    expect_same_tensors(*src, *back);

    float x[4] = {};
    EXPECT_THROW(w.add_tensor("token_embd.weight", {4}, GGMLType::F32, x, 16), Error);  // dup
    EXPECT_THROW(w.add_tensor("short", {4}, GGMLType::F32, x, 12), Error);  // wrong size
    EXPECT_THROW(w.add_tensor("q", {4}, GGMLType::Q8_0, x, 16), Error);     // block size
    GGUFWriter bad;
    bad.set_u32("general.alignment", 48);
    EXPECT_THROW(bad.to_bytes(), Error);
}

TEST(GGUF, KnownButUnsupportedTypesStillLoad) {
    GGUFWriter w;
    w.set_string("general.architecture", "test");
    std::vector<uint8_t> blocks(2 * type_traits(GGMLType::IQ2_XXS).type_size, 0x5a);
    w.add_tensor("iq", {256, 2}, GGMLType::IQ2_XXS, blocks.data(), blocks.size());
    std::vector<uint8_t> q81(type_traits(GGMLType::Q8_1).type_size, 1);
    w.add_tensor("q81", {32}, GGMLType::Q8_1, q81.data(), q81.size());
    const std::string path = test::temp_dir("gguf-unsupported") + "/iq.gguf";
    w.write(path);
    auto f = GGUFFile::open(path);
    EXPECT_EQ(f->tensor("iq").type, GGMLType::IQ2_XXS);
    EXPECT_EQ(f->tensor("iq").nbytes, blocks.size());
    EXPECT_EQ(f->tensor("iq").data[0], 0x5a);
    EXPECT_EQ(f->tensor("q81").type, GGMLType::Q8_1);
}

// ---------------------------------------------------------------------------------------------
// Corrupted files

// A small valid file whose fields are easy to find by their unique key / tensor names.
Bytes small_file(uint32_t version = 3) {
    GGUFWriter w(version);
    w.set_string("general.architecture", "test");
    w.set_u32("general.alignment", 32);
    w.set_i32_array("test.k1", {1, 2, 3});
    w.set_bool("test.k2", true);
    std::vector<float> a(16, 1.0f);
    w.add_tensor("tensor.a", {8, 2}, GGMLType::F32, a.data(), a.size() * 4);
    std::vector<uint8_t> b(2 * 34, 7);
    w.add_tensor("tensor.b", {32, 2}, GGMLType::Q8_0, b.data(), b.size());
    return w.to_bytes();
}

// Position just after the (unique) string s in the bytes, i.e. where its value / info begins.
size_t after(const Bytes& b, const std::string& s) {
    auto it = std::search(b.begin(), b.end(), s.begin(), s.end());
    if (it == b.end()) throw std::runtime_error("test bug: '" + s + "' not in file");
    return static_cast<size_t>(it - b.begin()) + s.size();
}

template <class T>
void poke(Bytes& b, size_t pos, T v) {
    std::memcpy(b.data() + pos, &v, sizeof(T));
}

// Offsets inside the tensor info of tensor.b: n_dims, ne[0], ne[1], type, offset.
size_t b_ndims(const Bytes& b) {
    return after(b, "tensor.b");
}
size_t b_dim(const Bytes& b, int d) {
    return b_ndims(b) + 4 + 8 * d;
}
size_t b_type(const Bytes& b) {
    return b_dim(b, 2);
}
size_t b_offset(const Bytes& b) {
    return b_type(b) + 4;
}

struct Corruption {
    const char* name;
    std::function<void(Bytes&)> mutate;
    const char* expect;    // substring of the error message
    uint32_t version = 3;  // of the small file the case starts from
};

std::vector<Corruption> corruptions() {
    return {
        {"bad magic", [](Bytes& b) { b[0] = 'X'; }, "magic"},
        {"version 0", [](Bytes& b) { poke<uint32_t>(b, 4, 0); }, "version 0"},
        {"version 4", [](Bytes& b) { poke<uint32_t>(b, 4, 4); }, "version 4"},
        {"big-endian version", [](Bytes& b) { poke<uint32_t>(b, 4, 0x03000000); }, "big-endian"},
        {"shorter than header", [](Bytes& b) { b.resize(6); }, "shorter than the GGUF header"},
        {"empty file", [](Bytes& b) { b.clear(); }, "shorter than the GGUF header"},
        {"truncated in counts", [](Bytes& b) { b.resize(12); }, "truncated"},
        {"truncated in kv", [](Bytes& b) { b.resize(after(b, "test.k1") + 6); }, "truncated"},
        {"truncated in tensor info", [](Bytes& b) { b.resize(b_dim(b, 1) + 3); }, "truncated"},
        {"truncated data", [](Bytes& b) { b.resize(b.size() - 40); }, "past the end"},
        {"absurd tensor count", [](Bytes& b) { poke<uint64_t>(b, 8, 1ull << 40); }, "tensor count"},
        {"absurd kv count", [](Bytes& b) { poke<uint64_t>(b, 16, 1ull << 60); }, "kv count"},
        {"absurd array count",
         [](Bytes& b) { poke<uint64_t>(b, after(b, "test.k1") + 8, 1ull << 61); }, "array count"},
        {"string length beyond file",
         [](Bytes& b) { poke<uint64_t>(b, after(b, "general.architecture") + 4, 1ull << 50); },
         "past the end"},
        {"key length beyond file", [](Bytes& b) { poke<uint64_t>(b, 24, ~0ull); }, "past the end"},
        {"unknown kv value type", [](Bytes& b) { poke<uint32_t>(b, after(b, "test.k2"), 13); },
         "unknown value type 13"},
        {"unknown array elem type",
         [](Bytes& b) { poke<uint32_t>(b, after(b, "test.k1") + 4, 99); }, "unknown value type 99"},
        {"bool not 0/1", [](Bytes& b) { b[after(b, "test.k2") + 4] = 2; }, "bool"},
        {"duplicate key", [](Bytes& b) { b[after(b, "test.k2") - 1] = '1'; }, "duplicate key"},
        {"duplicate tensor", [](Bytes& b) { b[after(b, "tensor.b") - 1] = 'a'; },
         "duplicate tensor"},
        {"unknown tensor type", [](Bytes& b) { poke<uint32_t>(b, b_type(b), 4); },
         "unknown tensor type 4"},
        {"tensor type beyond table", [](Bytes& b) { poke<uint32_t>(b, b_type(b), 1000); },
         "unknown tensor type 1000"},
        {"n_dims 0", [](Bytes& b) { poke<uint32_t>(b, b_ndims(b), 0); }, "n_dims 0"},
        {"n_dims 5", [](Bytes& b) { poke<uint32_t>(b, b_ndims(b), 5); }, "n_dims 5"},
        {"dim 0", [](Bytes& b) { poke<uint64_t>(b, b_dim(b, 1), 0); }, "must be > 0"},
        {"negative dim", [](Bytes& b) { poke<int64_t>(b, b_dim(b, 1), -2); }, "must be > 0"},
        {"dims overflow int64",
         [](Bytes& b) {
             poke<uint64_t>(b, b_dim(b, 0), 1ull << 40);
             poke<uint64_t>(b, b_dim(b, 1), 1ull << 40);
         },
         "overflow"},
        {"ne0 not multiple of block", [](Bytes& b) { poke<uint64_t>(b, b_dim(b, 0), 48); },
         "block size"},
        {"misaligned offset", [](Bytes& b) { poke<uint64_t>(b, b_offset(b), 64 + 4); },
         "misaligned"},
        {"offset past end", [](Bytes& b) { poke<uint64_t>(b, b_offset(b), 1ull << 30); },
         "past the end"},
        {"offset+size overflows", [](Bytes& b) { poke<uint64_t>(b, b_offset(b), ~0ull - 31); },
         "past the end"},
        {"size past end", [](Bytes& b) { poke<uint64_t>(b, b_dim(b, 1), 1000); }, "past the end"},
        {"alignment 0", [](Bytes& b) { poke<uint32_t>(b, after(b, "general.alignment") + 4, 0); },
         "general.alignment 0"},
        {"alignment not power of two",
         [](Bytes& b) { poke<uint32_t>(b, after(b, "general.alignment") + 4, 48); },
         "general.alignment 48"},
        {"alignment wrong type",
         [](Bytes& b) { poke<uint32_t>(b, after(b, "general.alignment"), 5); },  // i32
         "general.alignment has type i32"},
        // The header counts one tensor less than the file holds: the data section would start
        // early and every weight be read shifted; the last tensor's bytes belong to none.
        {"tensor count one less", [](Bytes& b) { poke<uint64_t>(b, 8, 1); },
         "belong to no tensor: the header's tensor count (1) is probably wrong"},
        {"overlapping tensors", [](Bytes& b) { poke<uint64_t>(b, b_offset(b), 32); },
         "tensors 'tensor.a' and 'tensor.b' overlap"},
        // Control bytes in a name reach the message escaped (one line, no terminal escapes).
        {"control bytes in a name",
         [](Bytes& b) {
             poke<uint32_t>(b, b_type(b), 4);
             b[after(b, "tensor.b") - 2] = '\x1b';
             b[after(b, "test.k2") - 1] = '\n';
         },
         "tensor 'tensor\\x1bb': unknown tensor type 4"},
        // GGUF v1: 32-bit counts, lengths and dims.
        {"v1 absurd kv count", [](Bytes& b) { poke<uint32_t>(b, 12, 0xFFFFFFFFu); }, "kv count", 1},
        {"v1 absurd tensor count", [](Bytes& b) { poke<uint32_t>(b, 8, 0x10000000u); },
         "tensor count", 1},
        {"v1 key length beyond file", [](Bytes& b) { poke<uint32_t>(b, 16, 0x7FFFFFFFu); },
         "past the end", 1},
        {"v1 dim 0", [](Bytes& b) { poke<uint32_t>(b, after(b, "tensor.b") + 8, 0); },
         "dimension 1 is 0", 1},
        {"v1 truncated in tensor info", [](Bytes& b) { b.resize(after(b, "tensor.b") + 6); },
         "truncated", 1},
    };
}

TEST(GGUFCorrupt, SmallFileIsValid) {
    const std::string path = test::temp_dir("gguf-corrupt") + "/valid.gguf";
    write_bytes(path, small_file());
    auto f = GGUFFile::open(path);
    EXPECT_EQ(f->tensors().size(), 2u);
    EXPECT_EQ(f->get_int_array("test.k1"), (std::vector<int32_t>{1, 2, 3}));
    EXPECT_EQ(f->tensor("tensor.b").data[0], 7);
}

TEST(GGUFCorrupt, EachDefectThrowsErrorNamingIt) {
    const std::string dir = test::temp_dir("gguf-corrupt");
    const auto cases = corruptions();
    EXPECT_GE(cases.size(), 15u);
    for (const Corruption& c : cases) {
        SCOPED_TRACE(c.name);
        Bytes b = small_file(c.version);
        c.mutate(b);
        const std::string path = dir + "/case.gguf";
        write_bytes(path, b);
        try {
            GGUFFile::open(path);
            ADD_FAILURE() << "opened without error";
        } catch (const Error& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find(c.expect), std::string::npos) << "message: " << msg;
            EXPECT_NE(msg.find(path), std::string::npos) << "message lacks the path: " << msg;
            EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
        }
    }
}

TEST(GGUFCorrupt, MissingFileAndDirectoryThrow) {
    const std::string dir = test::temp_dir("gguf-corrupt");
    EXPECT_THROW(GGUFFile::open(dir + "/does-not-exist.gguf"), Error);
    EXPECT_THROW(GGUFFile::open(dir), Error);
}

// A FIFO as the model path is refused at once instead of blocking in open() for a writer. In a
// child process, so that a regression fails by alarm instead of hanging the suite.
TEST(GGUFCorrupt, FifoIsRefusedWithoutBlocking) {
    const std::string path = test::temp_dir("gguf-corrupt") + "/model.fifo";
    std::filesystem::remove(path);
    ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(5);
        try {
            GGUFFile::open(path);
            _exit(2);
        } catch (const Error& e) {
            _exit(std::string(e.what()).find("not a regular file") != std::string::npos ? 0 : 3);
        }
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << " (14: blocked)";
    EXPECT_EQ(WEXITSTATUS(status), 0);
    std::filesystem::remove(path);
}

TEST(GGUFCorrupt, DeeplyNestedArraysAreRejected) {
    GGUFValue v;
    v.type = GGUFType::ARRAY;
    v.elem_type = GGUFType::UINT8;
    for (int k = 0; k < 40; ++k) {
        GGUFValue outer;
        outer.type = GGUFType::ARRAY;
        outer.elem_type = GGUFType::ARRAY;
        outer.arr.push_back(std::move(v));
        v = std::move(outer);
    }
    GGUFWriter w;
    w.set("deep", v);
    const std::string path = test::temp_dir("gguf-corrupt") + "/deep.gguf";
    write_bytes(path, w.to_bytes());
    try {
        GGUFFile::open(path);
        ADD_FAILURE() << "opened";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("nested"), std::string::npos) << e.what();
    }
}

// Every truncation before the data section throws; byte flips at every header offset either load
// or throw Error (never crash, never another exception type). For v1 (32-bit counts) and v3.
TEST(GGUFCorrupt, TruncationAndByteFlipsAtEveryHeaderOffset) {
    const std::string path = test::temp_dir("gguf-fuzz") + "/fuzz.gguf";
    std::mt19937 rng(1234);
    for (uint32_t version : {1u, 3u}) {
        SCOPED_TRACE(version);
        const Bytes good = small_file(version);
        write_bytes(path, good);
        const size_t end = GGUFFile::open(path)->data_offset();
        for (size_t len = 0; len < end; ++len) {
            write_bytes(path, Bytes(good.begin(), good.begin() + len));
            EXPECT_THROW(GGUFFile::open(path), Error) << "truncated to " << len;
        }
        int loaded = 0, rejected = 0;
        for (size_t pos = 0; pos < end; ++pos) {
            for (uint8_t mask :
                 {uint8_t(0x01), uint8_t(0x80), uint8_t(0xff), static_cast<uint8_t>(rng() | 1)}) {
                Bytes b = good;
                b[pos] ^= mask;
                write_bytes(path, b);
                try {
                    auto f = GGUFFile::open(path);
                    for (const GGUFTensor& t : f->tensors()) {
                        ASSERT_LE(f->data_offset() + t.offset + t.nbytes, f->file_size());
                    }
                    ++loaded;
                } catch (const Error&) {
                    ++rejected;
                }
            }
        }
        EXPECT_GT(rejected, 0);
        EXPECT_GT(loaded, 0);  // e.g. flips inside string values keep the file valid
    }
}

}  // namespace
