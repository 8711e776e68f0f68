// `specula quantize` (quantize/quantize_file.h) against llama-quantize: the files it writes must be
// the ones llama-quantize (llama.cpp c392e509) wrote, byte for byte. The ladder files in
// ../shared/models/synthetic were made by llama-quantize from the shipped F32 master; the other
// cases (F16 / BF16 inputs, a tied output, row lengths that force fallbacks, qwen2, an MoE
// requantized from Q8_0) were made with the peer's llama-quantize when this test was written, and
// their SHA-256 digests are kept here (CI has no built peers). Then: a quantized file's logits stay
// within llama.cpp's own distance of that type from F32 (reference/cross_quant_tolerance.json)
// plus the engine parity tolerance, and bad input gets a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"
#include "model/load/model.h"
#include "model/session.h"
#include "quantize/quantize_file.h"
#include "sha256.h"
#include "test_util.h"

namespace {

using specula::quant::find_file_type;
using specula::quant::QuantizeOptions;
using specula::test::read_file;
using specula::test::shared_path;

const std::string kLadder = "models/synthetic/rand-llama-tok512-d256-l2-";

std::string tmp_out(const std::string& name) {
    return specula::test::temp_dir("quantize") + "/" + name;
}

// Quantizes `in` (a path) to type `type` with 2 threads; returns the output path.
std::string quantize(const std::string& in, const std::string& type, bool requantize = false) {
    QuantizeOptions o;
    o.input = in;
    o.output = tmp_out(std::filesystem::path(in).stem().string() + "-" + type + ".gguf");
    const auto ft = find_file_type(type);
    EXPECT_TRUE(ft.has_value()) << type;
    o.type = *ft;
    o.n_threads = 2;
    o.allow_requantize = requantize;
    specula::quant::quantize_file(o);
    return o.output;
}

class LadderBytes : public ::testing::TestWithParam<const char*> {};

TEST_P(LadderBytes, EqualsLlamaQuantizeFromTheF32Master) {
    const std::string type = GetParam();
    const std::string out = quantize(shared_path(kLadder + "F32.gguf"), type);
    const std::string ours = read_file(out), ref = read_file(shared_path(kLadder + type + ".gguf"));
    ASSERT_EQ(ours.size(), ref.size()) << type;
    size_t first = 0;
    while (first < ours.size() && ours[first] == ref[first]) ++first;
    EXPECT_EQ(first, ours.size()) << type << ": first differing byte at offset " << first;
    std::filesystem::remove(out);
}

INSTANTIATE_TEST_SUITE_P(Types, LadderBytes,
                         ::testing::Values("Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "IQ4_XS", "IQ4_NL",
                                           "Q4_0", "Q4_1", "Q5_0", "Q5_1"));

struct PeerCase {
    const char* input;  // under ../shared
    const char* type;
    bool requantize;
    uint64_t bytes;
    const char* sha256;  // of llama-quantize's output
};

const PeerCase kPeerCases[] = {
    {"models/synthetic/rand-llama-tok512-d256-l2-F16.gguf", "Q8_0", false, 1967456,
     "a0f466c9b94636e4002163891651c640adf09901f67f206b3db9be4f6d6c800b"},
    {"models/synthetic/rand-llama-tok512-d256-l2-BF16.gguf", "Q5_K_M", false, 1327200,
     "069b4b06634598150898da321afefb08cc244b9217dcd38e5b89d271e72d360b"},
    {"models/synthetic/rand-llama-tok512-d256-l2-tied-F16.gguf", "Q4_K_M", false, 592960,
     "ebb202e4be74fc96921408cf064398b1c2cac0309cad4cd09c88e6c4d575515f"},
    {"models/synthetic/rand-llama-tok512-d256-l1-draft-F16.gguf", "IQ4_XS", false, 610144,
     "fd47dc8cb439e3273048f54a74e0dfcb43b4213cfce6e05981818e8bba1ca43d"},
    {"models/synthetic/rand-qwen2-tok512-d256-l2-F16.gguf", "Q6_K", false, 882272,
     "16fe21afd3161f36bff16c86ec52b21df6c106ef7e93f62d641f7a177d7ca363"},
    // n_embd 64: every K-quant falls back (Q4_K -> Q5_0, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL).
    {"models/tinystories/stories260K.gguf", "Q4_K_M", false, 304096,
     "d2c1919e3114afe3ebc3dc44bebd564d63a66be7a27386ec185a37334b1c46e3"},
    {"models/tinystories/stories260K.gguf", "IQ4_XS", false, 277024,
     "d229542aa8bd450a173381c0d611bfa9252172b26010248320952dc0dea2ec44"},
    // MoE, 3-D expert tensors, requantized from Q8_0 (llama-quantize --allow-requantize).
    {"models/synthetic/rand-llama-moe4x2-tok512-d256-l2-Q8_0.gguf", "Q4_K_M", true, 1389440,
     "67b385a58a1cb349fb5d80bc45944b3168c00dd9c626f878398a22b110129593"},
};

TEST(QuantizeBytes, EqualLlamaQuantizeOutputsByDigest) {
    for (const PeerCase& c : kPeerCases) {
        const std::string out = quantize(shared_path(c.input), c.type, c.requantize);
        const std::string bytes = read_file(out);
        EXPECT_EQ(bytes.size(), c.bytes) << c.input << " " << c.type;
        EXPECT_EQ(specula::test::sha256_hex(bytes), c.sha256) << c.input << " " << c.type;
        std::filesystem::remove(out);
    }
}

TEST(QuantizeBytes, Sha256OfKnownStrings) {  // the helper the digests above rely on
    EXPECT_EQ(specula::test::sha256_hex(""),
              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(specula::test::sha256_hex("abc"),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(specula::test::sha256_hex(std::string(1000, 'a')).substr(0, 16), "41edece42d63e8d9");
}

TEST(QuantizeFile, SetsFileTypeLastAndKeepsTheMetadata) {
    const std::string in = shared_path(kLadder + "F32.gguf");
    const std::string out = quantize(in, "Q4_K_M");
    const auto src = specula::GGUFFile::open(in);
    const auto dst = specula::GGUFFile::open(out);
    EXPECT_EQ(dst->get_int("general.file_type"), 15);
    EXPECT_EQ(dst->get_int("general.quantization_version"), 2);
    const auto& kv = dst->metadata();
    ASSERT_GE(kv.size(), 2u);
    EXPECT_EQ(kv[kv.size() - 2].first, "general.quantization_version");
    EXPECT_EQ(kv.back().first, "general.file_type");
    for (const auto& [k, v] : src->metadata()) {
        if (k == "general.file_type" || k == "general.quantization_version") continue;
        ASSERT_TRUE(dst->has(k)) << k;
        EXPECT_EQ(dst->find(k)->to_string(64), v.to_string(64)) << k;
    }
    EXPECT_EQ(dst->tensor("output.weight").type, specula::GGMLType::Q6_K);
    EXPECT_EQ(dst->tensor("blk.1.attn_v.weight").type, specula::GGMLType::Q6_K);
    EXPECT_EQ(dst->tensor("blk.0.attn_v.weight").type, specula::GGMLType::Q4_K);
    EXPECT_EQ(dst->tensor("output_norm.weight").type, specula::GGMLType::F32);
    std::filesystem::remove(out);
}

// The last-prompt-token logits of the english prompt on `path`.
std::vector<float> last_logits(const std::string& path, const std::vector<int>& ids) {
    const auto model = specula::Model::load(path);
    specula::SessionParams sp;
    sp.n_ctx = 256;
    sp.n_threads = 1;
    specula::Session s(*model, sp);
    std::vector<specula::token_id> t(ids.begin(), ids.end());
    s.eval(t, false);
    const float* l = s.logits(0);
    return std::vector<float>(l, l + model->hparams().n_vocab);
}

TEST(QuantizeLogits, StayWithinTheTypesDistanceFromF32) {
    using nlohmann::json;
    const json ref =
        json::parse(read_file(shared_path("reference/" + kLadder.substr(17) + "F32.json")));
    const json tol = json::parse(read_file(shared_path("reference/cross_quant_tolerance.json")));
    std::vector<int> ids;
    for (const auto& p : ref["prompts"])
        if (p["name"] == "english") ids = p["token_ids"].get<std::vector<int>>();
    ASSERT_FALSE(ids.empty());
    const std::string bin = read_file(
        shared_path("reference/" + kLadder.substr(17) + "F32.english.last_prompt_logits.f32.bin"));
    std::vector<float> f32(bin.size() / 4);
    std::memcpy(f32.data(), bin.data(), bin.size());
    for (const char* type : {"Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "IQ4_XS"}) {
        const std::string out = quantize(shared_path(kLadder + "F32.gguf"), type);
        const std::vector<float> q = last_logits(out, ids);
        ASSERT_EQ(q.size(), f32.size());
        // llama.cpp's own distance of this type from F32 on the english prompt, plus the parity
        // tolerance of an engine on quantized weights (reference/README.md: 0.5).
        const double limit = tol["ladder"][type]["per_prompt"]["english"].get<double>() + 0.5;
        double worst = 0;
        for (size_t i = 0; i < q.size(); ++i)
            worst = std::max(worst, static_cast<double>(std::fabs(q[i] - f32[i])));
        EXPECT_LE(worst, limit) << type;
        EXPECT_GT(worst, 0.0) << type << ": identical to F32, so nothing was quantized";
        std::filesystem::remove(out);
    }
}

// llama-quantize's Q4_K_M mix on a Qwen3-8B shape (36 layers, GQA 4): attn_v and ffn_down get Q6_K
// in layers 0-3, 31-35 and every third between (6, 9, ..., 30); IQ4_XS gives attn_v Q5_K (GQA >= 4)
// and the first 36 / 8 = 4 ffn_down Q5_K; an 8-expert model gets Q8_0 attn_k / attn_v.
TEST(QuantizeMix, LayersThatGetMoreBits) {
    using specula::GGMLType;
    specula::quant::MixModel m;
    m.arch = "qwen3";
    m.n_layer = 36;
    m.n_gqa = 4;
    m.has_output = true;
    m.n_attention_wv = 36;
    const specula::quant::MixOptions opt;
    const auto q4km = *find_file_type("Q4_K_M");
    specula::quant::MixState st;
    std::string six;
    for (int il = 0; il < 36; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        const GGMLType v = tensor_type(q4km, m, st, p + "attn_v.weight", 4096, opt, nullptr);
        const GGMLType d = tensor_type(q4km, m, st, p + "ffn_down.weight", 12288, opt, nullptr);
        EXPECT_EQ(v, d) << il;
        EXPECT_EQ(tensor_type(q4km, m, st, p + "attn_q.weight", 4096, opt, nullptr),
                  GGMLType::Q4_K);
        if (v == GGMLType::Q6_K) six += std::to_string(il) + " ";
    }
    EXPECT_EQ(six, "0 1 2 3 6 9 12 15 18 21 24 27 30 31 32 33 34 35 ");
    EXPECT_EQ(tensor_type(q4km, m, st, "output.weight", 4096, opt, nullptr), GGMLType::Q6_K);
    EXPECT_EQ(tensor_type(q4km, m, st, "token_embd.weight", 4096, opt, nullptr), GGMLType::Q4_K);

    const auto iq4 = *find_file_type("IQ4_XS");
    specula::quant::MixState st2;
    int n_q5 = 0;
    for (int il = 0; il < 36; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        EXPECT_EQ(tensor_type(iq4, m, st2, p + "attn_v.weight", 4096, opt, nullptr),
                  GGMLType::Q5_K);
        n_q5 +=
            tensor_type(iq4, m, st2, p + "ffn_down.weight", 12288, opt, nullptr) == GGMLType::Q5_K;
    }
    EXPECT_EQ(n_q5, 4);

    m.n_expert = 8;
    specula::quant::MixState st3;
    EXPECT_EQ(tensor_type(q4km, m, st3, "blk.0.attn_k.weight", 4096, opt, nullptr), GGMLType::Q8_0);
    EXPECT_EQ(tensor_type(q4km, m, st3, "blk.0.attn_v.weight", 4096, opt, nullptr), GGMLType::Q8_0);
    EXPECT_EQ(tensor_type(q4km, m, st3, "blk.0.attn_output.weight", 4096, opt, nullptr),
              GGMLType::Q5_K);
    EXPECT_THROW(tensor_type(q4km, m, st3, "blk.99.ffn_down_exps.weight", 4096, opt, nullptr),
                 specula::Error);
}

TEST(QuantizeErrors, NameTheProblem) {
    const auto expect_error = [](const QuantizeOptions& o, const std::string& part) {
        try {
            specula::quant::quantize_file(o);
            ADD_FAILURE() << "no error; expected one containing '" << part << "'";
        } catch (const specula::Error& e) {
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
        }
        EXPECT_FALSE(std::filesystem::exists(o.output + ".part")) << "partial output left";
    };
    EXPECT_FALSE(find_file_type("Q4_K_Q").has_value());
    EXPECT_FALSE(find_file_type("IQ2_XXS").has_value());  // needs an importance matrix
    EXPECT_EQ(find_file_type("q4_k_m")->ftype, 15u);
    EXPECT_EQ(find_file_type("15")->name, "Q4_K_M");

    QuantizeOptions o;
    o.type = *find_file_type("Q4_K_M");
    o.input = shared_path("models/synthetic/rand-llama-tok512-d256-l2-Q8_0.gguf");
    o.output = tmp_out("requant.gguf");
    expect_error(o, "--allow-requantize");
    o.input = tmp_out("missing.gguf");
    expect_error(o, "missing.gguf");
    o.input = shared_path(kLadder + "F32.gguf");
    o.output = o.input;
    expect_error(o, "is the input file");
    o.output = tmp_out("no-such-dir/out.gguf");
    expect_error(o, "cannot open");
    o.input = shared_path("models/tinystories/stories260K.gguf");  // rows of 64 elements
    o.output = tmp_out("q6k.gguf");
    o.type = *find_file_type("Q6_K");
    o.mix.pure = true;
    expect_error(o, "do not fit Q6_K blocks of 256");
}

}  // namespace
