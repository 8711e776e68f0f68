// Tokenizer tests on the real vocabularies and llama.cpp's own test vectors in shared/vocab, and
// on the tokenizers embedded in the reference models (shared/reference/*.json token_ids).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "common/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

using namespace specula;
using specula::test::read_file;
using specula::test::shared_path;

namespace {

// Each vocabulary is loaded once per test run (a Tokenizer is immutable after loading).
const Tokenizer* load_vocab(const std::string& name) {
    static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
    auto& slot = cache[name];
    if (!slot) {
        auto f = GGUFFile::open(shared_path("vocab/ggml-vocab-" + name + ".gguf"));
        slot = Tokenizer::from_gguf(*f);
    }
    return slot.get();
}

// The 46 strings of a .inp file ("\n__ggml_vocab_test__\n" ends each one).
std::vector<std::string> read_inputs(const std::string& path) {
    const std::string sep = "\n__ggml_vocab_test__\n";
    const std::string all = read_file(path);
    std::vector<std::string> out;
    size_t pos = 0;
    for (size_t at; (at = all.find(sep, pos)) != std::string::npos; pos = at + sep.size()) {
        out.push_back(all.substr(pos, at - pos));
    }
    return out;
}

// One id list per line of a .out file.
std::vector<std::vector<token_id>> read_outputs(const std::string& path) {
    std::istringstream in(read_file(path));
    std::vector<std::vector<token_id>> out;
    for (std::string line; std::getline(in, line);) {
        std::istringstream ls(line);
        std::vector<token_id> ids;
        for (token_id id; ls >> id;) ids.push_back(id);
        out.push_back(ids);
    }
    return out;
}

std::string ids_str(const std::vector<token_id>& ids) {
    std::string s;
    for (token_id id : ids) {
        s += ' ';
        s += std::to_string(id);
    }
    return s;
}

// transformers' clean_up_tokenization, written from its documented replacements; an independent
// oracle for llama.cpp's clean_spaces on these inputs (they contain no " n't").
std::string hf_clean_up(std::string s) {
    const std::pair<std::string, std::string> reps[] = {
        {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
        {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (const auto& [from, to] : reps) {
        for (size_t p = 0; (p = s.find(from, p)) != std::string::npos;) {
            s.replace(p, from.size(), to);
            p += to.size();
        }
    }
    return s;
}

struct VocabCase {
    std::string vocab;    // ggml-vocab-<vocab>.gguf
    std::string vectors;  // ggml-vocab-<vectors>.gguf.inp/.out
    int detok_exact;      // llama.cpp's detokenization round trips (vocab README)
    bool clean_spaces;    // the others must equal the cleaned-up input
};

const VocabCase kCases[] = {
    {"llama-spm", "llama-spm", 46, false},
    {"phi-3", "phi-3", 46, false},
    {"gpt-2", "gpt-2", 44, true},
    {"deepseek-coder", "deepseek-coder", 46, false},
    {"deepseek-llm", "deepseek-llm", 46, false},
    {"falcon", "falcon", 44, true},
    {"mpt", "mpt", 44, true},
    {"starcoder", "starcoder", 44, true},
    {"refact", "refact", 44, true},
    {"llama3", "llama3", 44, true},
    {"llama3-instruct", "llama3", 44, true},
    {"qwen3", "qwen3", 46, false},
};

class VocabVectors : public ::testing::TestWithParam<VocabCase> {};

TEST_P(VocabVectors, TokenizeMatchesLlamaCpp) {
    const VocabCase& c = GetParam();
    auto tok = load_vocab(c.vocab);
    const std::string stem = "vocab/ggml-vocab-" + c.vectors + ".gguf";
    const auto inputs = read_inputs(shared_path(stem + ".inp"));
    const auto expected = read_outputs(shared_path(stem + ".out"));
    ASSERT_EQ(inputs.size(), 46u);
    ASSERT_EQ(expected.size(), 46u);
    int pass = 0;
    std::string failures;
    for (size_t i = 0; i < inputs.size(); ++i) {
        const auto got = tok->encode(inputs[i], /*add_special=*/false, /*parse_special=*/false);
        if (got == expected[i]) {
            ++pass;
        } else {
            failures += "\n  #" + std::to_string(i) + " want" + ids_str(expected[i]) +
                        "\n      got" + ids_str(got);
        }
    }
    EXPECT_EQ(pass, 46) << c.vocab << ": " << pass << "/46 exact" << failures;
}

TEST_P(VocabVectors, DetokenizeAsLlamaCpp) {
    const VocabCase& c = GetParam();
    auto tok = load_vocab(c.vocab);
    const std::string stem = "vocab/ggml-vocab-" + c.vectors + ".gguf";
    const auto inputs = read_inputs(shared_path(stem + ".inp"));
    const auto expected = read_outputs(shared_path(stem + ".out"));
    ASSERT_EQ(inputs.size(), expected.size());
    int exact = 0;
    std::string failures;
    for (size_t i = 0; i < inputs.size(); ++i) {
        const std::string text = tok->decode(expected[i]);
        if (text == inputs[i]) {
            ++exact;
            continue;
        }
        if (!c.clean_spaces || text != hf_clean_up(inputs[i])) {
            failures += "\n  #" + std::to_string(i) + " got '" + text + "'";
        }
    }
    EXPECT_EQ(exact, c.detok_exact) << c.vocab << ": " << exact << "/46 round trips" << failures;
    EXPECT_TRUE(failures.empty()) << c.vocab << ": unexpected detokenizations" << failures;
}

INSTANTIATE_TEST_SUITE_P(AllVocabs, VocabVectors, ::testing::ValuesIn(kCases),
                         [](const auto& info) {
                             std::string n = info.param.vocab;
                             std::replace(n.begin(), n.end(), '-', '_');
                             return n;
                         });

// Every reference model's prompts, tokenized with add_special=true, parse_special=false.
TEST(Tokenizer, ReferenceModelPrompts) {
    const std::string dir = shared_path("reference");
    std::set<std::string> models_seen;
    int prompts = 0;
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& p : files) {
        if (p.extension() != ".json") continue;
        const auto j = nlohmann::json::parse(read_file(p.string()));
        if (!j.is_object() || !j.contains("model") || !j.contains("prompts")) continue;
        const auto& m = j["model"];
        auto f = GGUFFile::open(shared_path(m["path"].get<std::string>()));
        auto tok = Tokenizer::from_gguf(*f);
        SCOPED_TRACE(p.filename().string());
        EXPECT_EQ(tok->n_vocab(), m["n_vocab"].get<int>());
        EXPECT_EQ(tok->bos(), m["bos_id"].get<int>());
        EXPECT_EQ(tok->eos(), m["eos_id"].get<int>());
        EXPECT_EQ(tok->add_bos(), m["add_bos"].get<bool>());
        for (const auto& pr : j["prompts"]) {
            const auto want = pr["token_ids"].get<std::vector<token_id>>();
            const auto got = tok->encode(pr["text"].get<std::string>(), true, false);
            EXPECT_EQ(got, want) << "prompt " << pr["name"] << "\n want" << ids_str(want)
                                 << "\n  got" << ids_str(got);
            ++prompts;
        }
        models_seen.insert(tok->model() + "/" + tok->pre() + "/" + std::to_string(tok->n_vocab()));
    }
    // tok512 SPM, Llama-2 SPM, GPT-2 and Llama-3 are all covered.
    EXPECT_TRUE(models_seen.count("llama//512"));
    EXPECT_TRUE(models_seen.count("llama//32000"));
    EXPECT_TRUE(models_seen.count("gpt2/gpt-2/50257"));
    EXPECT_TRUE(models_seen.count("gpt2/llama-bpe/128256"));
    EXPECT_GE(prompts, 80);
}

// By a linear scan, independent of the tokenizer's own index (which find_token uses).
token_id id_of(const Tokenizer& tok, const std::string& text) {
    token_id found = -1;
    for (token_id id = 0; id < tok.n_vocab(); ++id) {
        if (tok.token_text(id) == text) found = id;
    }
    if (found < 0) ADD_FAILURE() << "no token '" << text << "'";
    EXPECT_EQ(tok.find_token(text), found) << text;
    return found;
}

bool contains(const std::vector<token_id>& v, token_id id) {
    return std::find(v.begin(), v.end(), id) != v.end();
}

TEST(Tokenizer, Llama3SpecialTokens) {
    auto tok = load_vocab("llama3");
    const token_id bot = id_of(*tok, "<|begin_of_text|>"), eot = id_of(*tok, "<|eot_id|>");
    EXPECT_EQ(bot, 128000);
    EXPECT_EQ(eot, 128009);
    EXPECT_EQ(tok->token_attr(eot), TokenAttr::CONTROL);
    EXPECT_EQ(tok->find_token("no such token\x01"), -1);
    const std::string text = "<|begin_of_text|>Hello world<|eot_id|>";

    const auto parsed = tok->encode(text, false, true);
    std::vector<token_id> want = {bot};
    for (token_id id : tok->encode("Hello world", false, false)) want.push_back(id);
    want.push_back(eot);
    EXPECT_EQ(parsed, want);

    // Without parse_special the markers are plain text, and decode gives the text back.
    const auto plain = tok->encode(text, false, false);
    EXPECT_FALSE(contains(plain, bot));
    EXPECT_FALSE(contains(plain, eot));
    EXPECT_GT(plain.size(), parsed.size());
    EXPECT_EQ(tok->decode(plain), text);

    // add_special adds BOS (llama-bpe sets add_bos without a key), and no EOS.
    EXPECT_TRUE(tok->add_bos());
    EXPECT_FALSE(tok->add_eos());
    const auto with_bos = tok->encode("Hello world", true, false);
    ASSERT_FALSE(with_bos.empty());
    EXPECT_EQ(with_bos.front(), 128000);

    // CONTROL tokens render only with unparse_special.
    EXPECT_EQ(tok->decode(parsed, false, true), text);
    EXPECT_EQ(tok->decode(parsed, false, false), "Hello world");
    EXPECT_EQ(tok->token_to_piece(eot, false), "");
    EXPECT_EQ(tok->token_to_piece(eot, true), "<|eot_id|>");
}

TEST(Tokenizer, Qwen3SpecialTokens) {
    auto tok = load_vocab("qwen3");
    const token_id think = id_of(*tok, "<think>"), im_start = id_of(*tok, "<|im_start|>");
    EXPECT_EQ(tok->token_attr(think), TokenAttr::USER_DEFINED);
    EXPECT_EQ(tok->token_attr(im_start), TokenAttr::CONTROL);
    const std::string text = "<|im_start|>user\n<think>x</think>";

    // USER_DEFINED tokens are split out even without parse_special; CONTROL ones are not.
    const auto plain = tok->encode(text, false, false);
    EXPECT_TRUE(contains(plain, think));
    EXPECT_TRUE(contains(plain, id_of(*tok, "</think>")));
    EXPECT_FALSE(contains(plain, im_start));
    const auto parsed = tok->encode(text, false, true);
    ASSERT_FALSE(parsed.empty());
    EXPECT_EQ(parsed.front(), im_start);
    EXPECT_TRUE(contains(parsed, think));

    // USER_DEFINED always renders; CONTROL only with unparse_special; UNUSED [PADn] as "".
    EXPECT_EQ(tok->decode(parsed, false, false), "user\n<think>x</think>");
    EXPECT_EQ(tok->decode(parsed, false, true), text);
    const token_id pad = id_of(*tok, "[PAD151900]");
    EXPECT_EQ(tok->token_attr(pad), TokenAttr::UNUSED);
    EXPECT_EQ(tok->token_to_piece(pad), "");

    EXPECT_FALSE(tok->add_bos());
    EXPECT_EQ(tok->encode("hi", true, false), tok->encode("hi", false, false));
    EXPECT_EQ(tok->fim().pre, 151659);
    EXPECT_EQ(tok->fim().suf, 151661);
    EXPECT_EQ(tok->fim().mid, 151660);
    EXPECT_EQ(tok->fim().pad, 151662);
    EXPECT_EQ(tok->fim().rep, 151663);
    EXPECT_EQ(tok->fim().sep, 151664);
}

// The end-of-generation texts are ik_llama.cpp's (8337e4c), which adds <|end_of_text|> (Llama 3)
// and </s> (a NORMAL token in Qwen3's vocabulary, made CONTROL and EOG) to llama.cpp c392e509's.
TEST(Tokenizer, EogSets) {
    EXPECT_EQ(load_vocab("llama3")->eog_ids(), (std::vector<token_id>{128001, 128009}));
    EXPECT_EQ(load_vocab("llama3-instruct")->eog_ids(), (std::vector<token_id>{128001, 128009}));
    const auto qwen = load_vocab("qwen3");
    EXPECT_EQ(qwen->eog_ids(),
              (std::vector<token_id>{128247, 151643, 151645, 151662, 151663, 151664}));
    EXPECT_EQ(qwen->token_attr(128247), TokenAttr::CONTROL);  // </s>
    EXPECT_TRUE(qwen->is_eog(151645));
    EXPECT_FALSE(qwen->is_eog(151644));  // <|im_start|>
    const auto spm = load_vocab("llama-spm");
    EXPECT_TRUE(spm->is_eog(2));
    EXPECT_FALSE(spm->is_eog(1));
    const auto gpt2 = load_vocab("gpt-2");
    EXPECT_EQ(gpt2->eog_ids(), (std::vector<token_id>{50256}));
}

TEST(Tokenizer, SpmPiecesAndSpaces) {
    auto tok = load_vocab("llama-spm");
    const token_id nl = id_of(*tok, "<0x0A>");
    EXPECT_EQ(tok->token_attr(nl), TokenAttr::BYTE);
    EXPECT_EQ(tok->token_to_piece(nl), "\n");
    EXPECT_EQ(tok->token_to_piece(id_of(*tok, "<0xE2>")), "\xE2");
    EXPECT_EQ(tok->nl(), nl);
    EXPECT_EQ(tok->token_to_piece(id_of(*tok, "\xE2\x96\x81the")), " the");
    EXPECT_EQ(tok->token_to_piece(1, false), "");
    EXPECT_EQ(tok->token_to_piece(1, true), "<s>");

    // llama_detokenize strips the prefix space from the first token only: when BOS is removed
    // (remove_special) or rendered, the space stays.
    const auto ids = tok->encode("Hello world", true, false);
    ASSERT_GE(ids.size(), 2u);
    EXPECT_EQ(ids[0], 1);
    EXPECT_EQ(tok->decode(ids, true, true), " Hello world");
    EXPECT_EQ(tok->decode(ids, false, false), " Hello world");
    EXPECT_EQ(tok->decode(ids, false, true), "<s> Hello world");
    EXPECT_EQ(tok->decode({ids.begin() + 1, ids.end()}), "Hello world");
    EXPECT_EQ(tok->encode("", true, false), (std::vector<token_id>{1}));
    EXPECT_TRUE(tok->encode("", false, false).empty());
    EXPECT_THROW(tok->token_to_piece(tok->n_vocab()), Error);
}

TEST(Tokenizer, BpePiecesAreRawBytes) {
    const Tokenizer* tok = load_vocab("llama3");
    // GPT-2 byte alphabet: U+010A stands for byte 0x0A, U+0120 for 0x20; U+00C3 and U+00A9 for
    // themselves.
    const token_id nl = id_of(*tok, "\xC4\x8A");
    EXPECT_EQ(tok->token_to_piece(nl), "\n");
    EXPECT_EQ(tok->nl(), nl);
    EXPECT_EQ(tok->token_to_piece(id_of(*tok, "\xC4\xA0the")), " the");
    EXPECT_EQ(tok->token_to_piece(id_of(*tok, "\xC3\x83\xC2\xA9")), "\xC3\xA9");
    EXPECT_THROW(tok->decode({0, tok->n_vocab()}), Error);
    EXPECT_THROW(tok->decode({-1}), Error);
}

// Phi-3 (general.name "Phi3"): special tokens swallow the whitespace that follows them.
TEST(Tokenizer, Phi3SpecialTokensStripRight) {
    const Tokenizer* tok = load_vocab("phi-3");
    const token_id user = id_of(*tok, "<|user|>");
    std::vector<token_id> want = {user};
    for (token_id id : tok->encode("Hello", false, false)) want.push_back(id);
    EXPECT_EQ(tok->encode("<|user|>\n  Hello", false, true), want);
    // <s> is exempt: the space after it stays (and becomes part of the next fragment).
    const auto with_s = tok->encode("<s> Hello", false, true);
    ASSERT_FALSE(with_s.empty());
    EXPECT_EQ(with_s[0], 1);
    std::vector<token_id> rest(with_s.begin() + 1, with_s.end());
    EXPECT_EQ(rest, tok->encode(" Hello", false, false));
}

TEST(Tokenizer, Tok512ByteFallback) {
    auto f = GGUFFile::open(shared_path("models/tinystories/stories260K.gguf"));
    auto tok = Tokenizer::from_gguf(*f);
    EXPECT_EQ(tok->n_vocab(), 512);
    // A character with no piece falls back to its UTF-8 bytes, which decode back to it.
    const std::string text = "\xF0\x9F\xA6\x99 5";  // "🦙 5"
    const auto ids = tok->encode(text, false, false);
    std::string bytes;
    int byte_tokens = 0;
    for (token_id id : ids) {
        if (tok->token_attr(id) == TokenAttr::BYTE) {
            ++byte_tokens;
            bytes += tok->token_to_piece(id);
        }
    }
    EXPECT_EQ(bytes, "\xF0\x9F\xA6\x99");
    EXPECT_EQ(byte_tokens, 4);
    EXPECT_EQ(tok->decode(ids), text);
}

// Seeded random texts mixing scripts, whitespace (also non-ASCII), digits, punctuation, emoji,
// combining marks and joiners. `quotes` adds apostrophes and contractions.
std::vector<std::string> random_texts(uint32_t seed, int count, bool quotes) {
    std::vector<std::string> atoms = {"a",
                                      "Z",
                                      "q",
                                      "7",
                                      "0",
                                      "12345",
                                      " ",
                                      "  ",
                                      "\t",
                                      "\n",
                                      "\r\n",
                                      ".",
                                      ",",
                                      "!",
                                      "?",
                                      "-",
                                      "_",
                                      "(",
                                      ")",
                                      "<",
                                      ">",
                                      "#",
                                      "$",
                                      "`",
                                      "~",
                                      "|",
                                      "=",
                                      "\xC3\xA9",
                                      "\xC3\xBC",
                                      "\xC3\x9F",
                                      "\xD0\x96",
                                      "\xD1\x8B",
                                      "\xE4\xB8\xAD",
                                      "\xED\x95\x9C",
                                      "\xE3\x81\x82",
                                      "\xF0\x9F\xA6\x99",
                                      "\xF0\x9F\x98\x81",
                                      "\xE2\x80\x8D",
                                      "\xCC\x81",
                                      "\xC2\xA0",
                                      "\xE3\x80\x80",
                                      "\xC2\x85",
                                      "\xE1\xA0\x8E",
                                      "\xD9\xA3",
                                      "\xC2\xBD",
                                      "\xEF\xBC\x81",
                                      "Hello",
                                      " world",
                                      "  Hello",
                                      "\xE1\x9E\x80"};
    if (quotes) {
        for (const char* q : {"'", "'s", "'ll", "'VE", " 't", "''"}) atoms.push_back(q);
    }
    std::mt19937 rng(seed);
    std::vector<std::string> out;
    for (int i = 0; i < count; ++i) {
        std::string t;
        const int n = 1 + static_cast<int>(rng() % 24);
        for (int k = 0; k < n; ++k) t += atoms[rng() % atoms.size()];
        out.push_back(t);
    }
    return out;
}

// Decoding the tokens gives the text back (lossless vocabularies), or its clean-up for the
// vocabularies with clean_spaces (then without quotes, where llama.cpp's and transformers'
// clean-ups agree).
TEST(Tokenizer, RandomTextRoundTrips) {
    const std::pair<const char*, bool> vocabs[] = {
        {"llama-spm", false},    {"phi-3", false}, {"qwen3", false}, {"deepseek-coder", false},
        {"deepseek-llm", false}, {"gpt-2", true},  {"llama3", true}};
    for (const auto& [name, clean] : vocabs) {
        const Tokenizer* tok = load_vocab(name);
        int ok = 0, n = 0;
        std::string first_bad;
        for (const std::string& t : random_texts(1234, 300, !clean)) {
            const std::string back = tok->decode(tok->encode(t, false, false));
            const std::string want = clean ? hf_clean_up(t) : t;
            ++n;
            if (back == want) {
                ++ok;
            } else if (first_bad.empty()) {
                first_bad = "'" + t + "' -> '" + back + "'";
            }
        }
        EXPECT_EQ(ok, n) << name << ": first mismatch " << first_bad;
    }
}

// SentencePiece with byte fallback is lossless even on malformed UTF-8.
TEST(Tokenizer, SpmRoundTripsArbitraryBytes) {
    const Tokenizer* tok = load_vocab("llama-spm");
    std::mt19937 rng(99);
    for (int i = 0; i < 200; ++i) {
        std::string t;
        const int n = static_cast<int>(rng() % 16);
        for (int k = 0; k < n; ++k) t += static_cast<char>(rng() % 256);
        EXPECT_EQ(tok->decode(tok->encode(t, false, false)), t) << "case " << i;
    }
}

TEST(Tokenizer, InvalidUtf8NeverCrashes) {
    for (const char* name : {"llama-spm", "gpt-2", "llama3", "qwen3", "deepseek-llm"}) {
        auto tok = load_vocab(name);
        const std::string bad = std::string("a\xFF\xC3(b\xE2\x82 \xF0\x9F\x98", 12) + "\x80x";
        const auto ids = tok->encode(bad, true, true);
        EXPECT_FALSE(ids.empty()) << name;
        for (token_id id : ids) EXPECT_TRUE(id >= 0 && id < tok->n_vocab()) << name;
        (void)tok->decode(ids);
    }
}

std::string write_gguf(const std::string& name, const std::string& model, const std::string& pre) {
    GGUFWriter w;
    w.set_string("general.architecture", "llama");
    w.set_string("tokenizer.ggml.model", model);
    if (!pre.empty()) w.set_string("tokenizer.ggml.pre", pre);
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "ab"});
    w.set_string_array("tokenizer.ggml.merges", {"a b"});
    const std::string path = specula::test::temp_dir("tokenizer") + "/" + name + ".gguf";
    w.write(path);
    return path;
}

std::string load_error(const std::string& path) {
    try {
        auto f = GGUFFile::open(path);
        Tokenizer::from_gguf(*f);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(Tokenizer, UnsupportedModelsAreErrors) {
    const std::string m = load_error(write_gguf("bert", "bert", ""));
    EXPECT_NE(m.find("tokenizer.ggml.model 'bert' is not supported"), std::string::npos) << m;
    EXPECT_NE(m.find("llama, gpt2"), std::string::npos) << m;
    const std::string p = load_error(write_gguf("pre", "gpt2", "nonesuch"));
    EXPECT_NE(p.find("tokenizer.ggml.pre 'nonesuch' is not supported"), std::string::npos) << p;
    EXPECT_NE(p.find("qwen2"), std::string::npos) << p;

    // Missing or inconsistent keys name the key.
    const std::string dir = specula::test::temp_dir("tokenizer");
    auto write = [&](const std::string& name, auto&& fill) {
        GGUFWriter w;
        w.set_string("general.architecture", "llama");
        fill(w);
        w.write(dir + "/" + name + ".gguf");
        return load_error(dir + "/" + name + ".gguf");
    };
    EXPECT_NE(write("nomodel", [](GGUFWriter&) {}).find("tokenizer.ggml.model"), std::string::npos);
    EXPECT_NE(write("nomerges",
                    [](GGUFWriter& w) {
                        w.set_string("tokenizer.ggml.model", "gpt2");
                        w.set_string_array("tokenizer.ggml.tokens", {"a"});
                    })
                  .find("tokenizer.ggml.merges"),
              std::string::npos);
    EXPECT_NE(
        write("notokens", [](GGUFWriter& w) { w.set_string("tokenizer.ggml.model", "llama"); })
            .find("tokenizer.ggml.tokens"),
        std::string::npos);
    EXPECT_NE(write("scores",
                    [](GGUFWriter& w) {
                        w.set_string("tokenizer.ggml.model", "llama");
                        w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
                        w.set_f32_array("tokenizer.ggml.scores", {0.f});
                    })
                  .find("tokenizer.ggml.scores has 1 entries, expected 2"),
              std::string::npos);

    // A tiny valid BPE vocabulary works: "ab" merges, "c" has no token and is dropped.
    auto f = GGUFFile::open(write_gguf("tiny", "gpt2", "gpt-2"));
    auto tok = Tokenizer::from_gguf(*f);
    EXPECT_EQ(tok->encode("ab", false, false), (std::vector<token_id>{2}));
    EXPECT_EQ(tok->encode("abc", false, false), (std::vector<token_id>{2}));
}

TEST(Tokenizer, LargeVocabLoadsQuickly) {
    // 151936 tokens and 151387 merges; the whole build is bounded by the test timeout, and the
    // merge ranks must be those of the file.
    auto tok = load_vocab("qwen3");
    EXPECT_EQ(tok->n_vocab(), 151936);
    EXPECT_EQ(tok->pre(), "qwen2");
}

}  // namespace
