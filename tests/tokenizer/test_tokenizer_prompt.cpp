// What `run` and `serve` share before generating (tokenizer/prompt.h): prompt tokens with BOS as
// the vocabulary says and BOS alone for an empty prompt, the context-fit check with its two
// failures named for each front end, and the default thread count.
#include <gtest/gtest.h>

#include "common/error.h"
#include "gguf/gguf.h"
#include "test_util.h"
#include "tokenizer/prompt.h"

using namespace specula;

TEST(Frontend, PromptTokensWithBosFallback) {
    const auto file = GGUFFile::open(test::shared_path("models/tinystories/stories260K.gguf"));
    const auto tok = Tokenizer::from_gguf(*file);
    const auto ids = tokenize_prompt(*tok, "Once upon a time");
    EXPECT_EQ(ids, tok->encode("Once upon a time", true, true));
    ASSERT_GT(ids.size(), 1u);
    EXPECT_EQ(ids[0], tok->bos());
    EXPECT_EQ(tokenize_prompt(*tok, ""), std::vector<token_id>{tok->bos()});
}

TEST(Frontend, ContextFit) {
    EXPECT_EQ(check_context(10, 20, 30, "", "max_tokens").what, ContextFit::fits);
    EXPECT_EQ(check_context(10, -1, 10, "", "max_tokens").what, ContextFit::fits);
    const ContextFit prompt = check_context(31, -1, 30, " (-c)", "-n");
    EXPECT_EQ(prompt.what, ContextFit::prompt_too_long);
    EXPECT_EQ(prompt.message, "the prompt is 31 tokens but the context (-c) holds 30");
    const ContextFit budget = check_context(10, 21, 30, "", "max_tokens");
    EXPECT_EQ(budget.what, ContextFit::budget_too_long);
    EXPECT_EQ(budget.message,
              "prompt (10 tokens) + max_tokens 21 exceeds the context of 30 tokens");
}
