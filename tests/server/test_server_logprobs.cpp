// Logprobs of the prompt through `specula serve`, against the real stories260K target with
// llama2xs as the draft model: completions' echo with logprobs (the prompt's first, the first
// token's null, long prompts in chunks) and vLLM's prompt_logprobs (each prompt token's logprob,
// rank and alternatives, equal to what a greedy generation reported for the same tokens).
// Generated tokens' logprobs are test_server_api.cpp's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "server/server_process.h"
#include "test_util.h"

namespace {

using json = nlohmann::json;
using specula::test::server_draft_path;
using specula::test::server_target_path;
using specula::test::ServerProcess;
using Reply = specula::test::JsonReply;
using specula::test::post_json;

json ok(const ServerProcess& s, const std::string& path, const json& body) {
    Reply r = post_json(s, path, body);
    EXPECT_EQ(r.status, 200) << body.dump() << " -> " << r.body.dump();
    return r.body;
}

class ServerPromptLogprobs : public specula::test::SharedServerTest<ServerPromptLogprobs> {
  public:
    static std::vector<std::string> server_args() {
        return {"-m",  server_target_path(), "-md", server_draft_path(), "--draft", "4", "-c",
                "1024"};
    }
    static const char* server_tag() { return "logprobs"; }
};

TEST_F(ServerPromptLogprobs, CompletionLogprobsWithEcho) {
    const json r = ok(s(), "/v1/completions",
                      {{"prompt", "Lily saw a"},
                       {"max_tokens", 8},
                       {"temperature", 0},
                       {"logprobs", 2},
                       {"echo", true}});
    const json& c = r["choices"][0];
    const std::string text = c["text"];
    EXPECT_EQ(text.rfind("Lily saw a", 0), 0u) << text;  // the prompt as sent
    const json& lp = c["logprobs"];
    const size_t n_prompt = r["usage"]["prompt_tokens"];
    ASSERT_EQ(lp["tokens"].size(), n_prompt + 8);
    EXPECT_TRUE(lp["token_logprobs"][0].is_null());  // BOS: nothing predicts it
    std::string generated;
    for (size_t i = n_prompt; i < lp["tokens"].size(); ++i)
        generated += lp["tokens"][i].get<std::string>();
    EXPECT_EQ(text.substr(text.size() - generated.size()), generated);
    for (size_t i = 1; i < lp["tokens"].size(); ++i) {
        EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
        EXPECT_EQ(lp["top_logprobs"][i].size(), i < n_prompt ? lp["top_logprobs"][i].size() : 2u);
    }
    for (size_t i = 1; i < lp["text_offset"].size(); ++i)
        EXPECT_GE(lp["text_offset"][i].get<size_t>(), lp["text_offset"][i - 1].get<size_t>());

    // A prompt longer than one evaluation chunk (64 tokens), given as token ids: the echo is its
    // text and every token after the first has a logprob and its alternative.
    std::string story;
    for (int i = 0; i < 12; ++i) story += "The cat sat on the mat and looked at the dog. ";
    const json ids = ok(s(), "/tokenize", {{"content", story}, {"add_special", true}})["tokens"];
    ASSERT_GT(ids.size(), 130u);
    const json long_r = ok(
        s(), "/v1/completions",
        {{"prompt", ids}, {"max_tokens", 4}, {"temperature", 0}, {"logprobs", 1}, {"echo", true}});
    const json& llp = long_r["choices"][0]["logprobs"];
    ASSERT_EQ(llp["tokens"].size(), ids.size() + 4);
    EXPECT_EQ(long_r["choices"][0]["text"].get<std::string>().rfind(story.substr(0, 40), 0), 0u);
    for (size_t i = 1; i < ids.size() + 4; ++i) {
        ASSERT_TRUE(llp["token_logprobs"][i].is_number()) << i;
        EXPECT_LE(llp["token_logprobs"][i].get<double>(), 0.0);
        EXPECT_EQ(llp["top_logprobs"][i].size(), 1u);
    }
    // The repeated sentence is predictable: late prompt tokens are far likelier than early ones.
    EXPECT_GT(llp["token_logprobs"][ids.size() - 2].get<double>(),
              llp["token_logprobs"][2].get<double>());
}

// vLLM's prompt_logprobs: one entry per prompt token (null first), each keyed by token id with
// the prompt token's logprob, rank and text and the N most likely alternatives. Checked against
// the generation path: the tokens a greedy completion generated, given back as a prompt, get the
// logprobs that completion reported for them (the same logit rows, batch invariant).
TEST_F(ServerPromptLogprobs, VllmPromptLogprobs) {
    const json gen = ok(s(), "/v1/completions",
                        {{"prompt", "Lily saw a"},
                         {"max_tokens", 6},
                         {"temperature", 0},
                         {"logprobs", 2},
                         {"ignore_eos", true}});
    const size_t n_prompt = gen["usage"]["prompt_tokens"];
    const json& glp = gen["choices"][0]["logprobs"];
    ASSERT_EQ(glp["token_logprobs"].size(), 6u);
    const std::string full = "Lily saw a" + gen["choices"][0]["text"].get<std::string>();
    const json ids = ok(s(), "/tokenize", {{"content", full}, {"add_special", true}})["tokens"];
    ASSERT_EQ(ids.size(), n_prompt + 6) << "the generated text tokenizes back to its tokens";

    const json r =
        ok(s(), "/v1/completions",
           {{"prompt", ids}, {"max_tokens", 1}, {"temperature", 0}, {"prompt_logprobs", 2}});
    const json& plp = r["choices"][0]["prompt_logprobs"];
    ASSERT_EQ(plp.size(), ids.size());
    EXPECT_TRUE(plp[0].is_null());
    EXPECT_TRUE(r["choices"][0]["logprobs"].is_null());  // prompt_logprobs alone: no echo
    for (size_t i = 1; i < ids.size(); ++i) {
        const std::string id = std::to_string(ids[i].get<int>());
        ASSERT_TRUE(plp[i].contains(id)) << i << ": " << plp[i].dump();
        const json& e = plp[i][id];
        EXPECT_LE(e["logprob"].get<double>(), 0.0);
        EXPECT_GE(e["rank"].get<int>(), 1);
        EXPECT_TRUE(e["decoded_token"].is_string());
        // The token and 2 alternatives, one of which may be the token itself.
        EXPECT_LE(plp[i].size(), 3u);
        EXPECT_GE(plp[i].size(), 2u);
        // Ranks order the logprobs; the most likely token is among the entries.
        int best_rank = 1 << 30;
        for (const auto& [a_id, a] : plp[i].items()) {
            best_rank = std::min(best_rank, a["rank"].get<int>());
            for (const auto& [b_id, b] : plp[i].items()) {
                if (a["rank"].get<int>() < b["rank"].get<int>()) {
                    EXPECT_GT(a["logprob"].get<double>(), b["logprob"].get<double>()) << a_id;
                }
            }
        }
        EXPECT_EQ(best_rank, 1) << plp[i].dump();
        if (i < n_prompt) continue;
        // A generated token: greedy picked the most likely, with the logprob reported then.
        const size_t g = i - n_prompt;
        EXPECT_EQ(e["rank"], 1) << i;
        EXPECT_NEAR(e["logprob"].get<double>(), glp["token_logprobs"][g].get<double>(), 1e-6) << i;
        EXPECT_EQ(e["decoded_token"], glp["tokens"][g]) << i;
        for (const auto& [text, lp] : glp["top_logprobs"][g].items()) {
            bool found = false;
            for (const auto& [other, a] : plp[i].items())
                found = found || (a["decoded_token"] == text &&
                                  std::abs(a["logprob"].get<double>() - lp.get<double>()) < 1e-6);
            EXPECT_TRUE(found) << i << ": " << text << " in " << plp[i].dump();
        }
    }

    // Chat: once, beside the choices, over the rendered prompt's tokens.
    const json chat = ok(s(), "/v1/chat/completions",
                         {{"messages", {{{"role", "user"}, {"content", "Lily saw a"}}}},
                          {"max_tokens", 1},
                          {"prompt_logprobs", 0}});
    ASSERT_EQ(chat["prompt_logprobs"].size(), chat["usage"]["prompt_tokens"].get<size_t>());
    EXPECT_EQ(chat["prompt_logprobs"][1].size(), 1u);  // 0 alternatives: the token alone

    // Refused, naming the field: with stream (as vLLM), and past 20.
    for (const json& bad : {json{{"prompt", "Lily"}, {"prompt_logprobs", 1}, {"stream", true}},
                            json{{"prompt", "Lily"}, {"prompt_logprobs", 21}},
                            json{{"prompt", "Lily"}, {"prompt_logprobs", "2"}}}) {
        const Reply b = post_json(s(), "/v1/completions", bad);
        EXPECT_EQ(b.status, 400) << bad.dump();
        EXPECT_EQ(b.body["error"]["param"], "prompt_logprobs") << b.body.dump();
    }
}

}  // namespace
