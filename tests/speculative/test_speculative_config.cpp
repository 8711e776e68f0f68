// SpeculativeConfig parsing (speculative/config.h): the draft length, the method from each of its
// spellings (--spec-type draft / draft_model / ngram, --lookup, a draft model alone), vLLM's
// --speculative-config JSON overriding the flags, and clear errors for bad combinations.
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "speculative/config.h"

using namespace specula;

namespace {

// The Error message of parse_speculative_flags(f), "" when it succeeds.
std::string error_of(const SpeculativeFlags& f) {
    try {
        parse_speculative_flags(f);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(SpecConfig, ParsesDraftLength) {
    SpeculativeConfig c;
    parse_draft_length("auto", c);
    EXPECT_TRUE(c.draft_auto);
    parse_draft_length("6", c);
    EXPECT_FALSE(c.draft_auto);
    EXPECT_EQ(c.n_draft, 6);
    EXPECT_EQ(draft_length_name(c), "6");
    parse_draft_length("0", c);
    EXPECT_EQ(c.n_draft, 0);
    c.draft_auto = true;
    EXPECT_EQ(draft_length_name(c), "auto");
    for (const char* bad : {"", "x", "-1", "65", "3x", " 4"})
        EXPECT_THROW(parse_draft_length(bad, c), Error) << bad;
}

// Without --draft the length is chosen every step (auto); a length given stays fixed.
TEST(SpecConfig, DefaultsArePlainDecodingWithAnAutoLength) {
    const SpeculativeConfig c = parse_speculative_flags(SpeculativeFlags{});
    EXPECT_EQ(c.method, SpecMethod::none);
    EXPECT_TRUE(c.draft_auto);
    EXPECT_EQ(draft_length_name(c), "auto");
    SpeculativeFlags md;
    md.model_draft = "draft.gguf";
    EXPECT_EQ(parse_speculative_flags(md).method, SpecMethod::draft_model);
    EXPECT_TRUE(parse_speculative_flags(md).draft_auto);
    md.draft = "4";
    EXPECT_FALSE(parse_speculative_flags(md).draft_auto);
    EXPECT_EQ(parse_speculative_flags(md).n_draft, 4);
    EXPECT_EQ(c.draft_min, 0);
    EXPECT_EQ(c.p_min, 0.0f);
    EXPECT_EQ(c.n_forced, 8);
    EXPECT_EQ(c.ngram.ngram_min, 2);
    EXPECT_EQ(c.ngram.ngram_max, 4);
    EXPECT_STREQ(method_name(c.method), "none");
}

TEST(SpecConfig, MethodFromEachSpelling) {
    SpeculativeFlags f;
    f.model_draft = "d.gguf";
    EXPECT_EQ(parse_speculative_flags(f).method, SpecMethod::draft_model);  // -md alone
    for (const char* t : {"draft", "draft_model"}) {
        f.spec_type = t;
        const SpeculativeConfig c = parse_speculative_flags(f);
        EXPECT_EQ(c.method, SpecMethod::draft_model) << t;
        EXPECT_EQ(c.draft_model, "d.gguf");
    }
    SpeculativeFlags g;
    g.spec_type = "ngram";
    g.ngram_min = 1;
    g.ngram_max = 3;
    g.draft = "auto";
    g.draft_min = 2;
    g.p_min = 0.5f;
    const SpeculativeConfig c = parse_speculative_flags(g);
    EXPECT_EQ(c.method, SpecMethod::ngram);
    EXPECT_STREQ(method_name(c.method), "ngram");
    EXPECT_EQ(c.ngram.ngram_min, 1);
    EXPECT_EQ(c.ngram.ngram_max, 3);
    EXPECT_TRUE(c.draft_auto);
    EXPECT_EQ(c.draft_min, 2);
    EXPECT_EQ(c.p_min, 0.5f);
    EXPECT_EQ(c.n_forced, 8);
    SpeculativeFlags l;
    l.lookup = true;
    EXPECT_EQ(parse_speculative_flags(l).method, SpecMethod::ngram);
}

TEST(SpecConfig, ForcedDrafts) {
    SpeculativeFlags f;
    f.forced_drafts = 0;
    EXPECT_EQ(parse_speculative_flags(f).n_forced, 0);
    f.forced_drafts = 16;
    EXPECT_EQ(parse_speculative_flags(f).n_forced, 16);
    for (int bad : {-1, 65}) {
        f.forced_drafts = bad;
        try {
            parse_speculative_flags(f);
            ADD_FAILURE() << bad << " accepted";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("--forced-drafts"), std::string::npos) << e.what();
        }
    }
}

TEST(SpecConfig, VllmJsonOverridesTheFlags) {
    SpeculativeFlags f;
    f.draft = "2";
    f.speculative_config = R"({"method": "draft_model", "model": "x.gguf",
                               "num_speculative_tokens": 5})";
    SpeculativeConfig c = parse_speculative_flags(f);
    EXPECT_EQ(c.method, SpecMethod::draft_model);
    EXPECT_EQ(c.draft_model, "x.gguf");
    EXPECT_EQ(c.n_draft, 5);
    f.speculative_config = R"({"model": "y.gguf"})";  // a model alone means draft_model
    c = parse_speculative_flags(f);
    EXPECT_EQ(c.method, SpecMethod::draft_model);
    EXPECT_EQ(c.n_draft, 2);
    SpeculativeFlags g;
    g.lookup = true;
    g.speculative_config = R"({"method": "ngram", "num_speculative_tokens": 3})";
    c = parse_speculative_flags(g);
    EXPECT_EQ(c.method, SpecMethod::ngram);
    EXPECT_EQ(c.n_draft, 3);
}

// vLLM's n-gram keys set the n-gram lengths (one bound given sets the other to it, as vLLM
// does); its output-neutral keys are accepted at their neutral values.
TEST(SpecConfig, VllmPromptLookupAndNeutralKeys) {
    SpeculativeFlags f;
    f.speculative_config =
        R"({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 2,
            "prompt_lookup_max": 6, "draft_tensor_parallel_size": 1, "enforce_eager": true,
            "quantization": null})";
    SpeculativeConfig c = parse_speculative_flags(f);
    EXPECT_EQ(c.method, SpecMethod::ngram);
    EXPECT_EQ(c.n_draft, 5);
    EXPECT_EQ(c.ngram.ngram_min, 2);
    EXPECT_EQ(c.ngram.ngram_max, 6);
    f.speculative_config = R"({"method": "ngram", "prompt_lookup_max": 3})";
    c = parse_speculative_flags(f);
    EXPECT_EQ(c.ngram.ngram_min, 3);
    EXPECT_EQ(c.ngram.ngram_max, 3);
    f.speculative_config = R"({"method": "ngram"})";  // neither: the --spec-ngram flags
    f.ngram_min = 1;
    f.ngram_max = 7;
    c = parse_speculative_flags(f);
    EXPECT_EQ(c.ngram.ngram_min, 1);
    EXPECT_EQ(c.ngram.ngram_max, 7);
}

TEST(SpecConfig, BadCombinationsAreErrorsNamingTheFlag) {
    SpeculativeFlags f;
    f.spec_type = "draft";
    EXPECT_NE(error_of(f).find("-md"), std::string::npos) << error_of(f);
    f.spec_type = "eagle";
    EXPECT_NE(error_of(f).find("--spec-type"), std::string::npos) << error_of(f);
    f = {};
    f.spec_type = "ngram";
    f.model_draft = "d.gguf";
    EXPECT_NE(error_of(f).find("-md"), std::string::npos) << error_of(f);
    f = {};
    f.lookup = true;
    f.spec_type = "draft";
    EXPECT_NE(error_of(f).find("--lookup"), std::string::npos) << error_of(f);
    f = {};
    f.draft = "many";
    EXPECT_NE(error_of(f).find("--draft"), std::string::npos) << error_of(f);
    f = {};
    f.draft_min = -1;
    EXPECT_NE(error_of(f).find("--draft-min"), std::string::npos) << error_of(f);
    f = {};
    f.ngram_min = 3;
    f.ngram_max = 2;
    EXPECT_NE(error_of(f).find("--spec-ngram"), std::string::npos) << error_of(f);
    for (const char* bad :
         {"[1]", "{", R"({"method": 3})", R"({"num_speculative_tokens": 65})",
          R"({"num_speculative_tokens": "4"})", R"({"method": "medusa"})", R"({"model": 1})",
          R"({"draft_tensor_parallel_size": 2})",
          R"({"method": "ngram", "prompt_lookup_min": 4, "prompt_lookup_max": 2})",
          R"({"method": "draft_model", "model": "d", "prompt_lookup_max": 3})",
          R"({"method": "ngram", "prompt_lookup_max": 0})", R"({"disable_by_batch_size": 4})",
          R"({"quantization": "fp8"})", R"({"enforce_eager": "yes"})", R"({"lookahead": 2})"}) {
        SpeculativeFlags g;
        g.speculative_config = bad;
        EXPECT_NE(error_of(g).find("--speculative-config"), std::string::npos)
            << bad << ": " << error_of(g);
    }
}
