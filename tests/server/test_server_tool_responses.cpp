// Chat responses with tools and reasoning (server/api/responses.h): generated text holding Hermes
// <tool_call> blocks becomes message.tool_calls (id, type function, function.name, arguments as
// a JSON string) with finish_reason "tool_calls"; streamed in pieces cut anywhere, the content
// deltas never show the call's markup and the last deltas carry the same calls as OpenAI streams
// them (per call a head with arguments "", then the arguments); parallel_tool_calls false keeps
// the first; reasoning before the call goes to reasoning_content. Harmony the same way.
#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "server/api/responses.h"
#include "test_util.h"

namespace {

using json = nlohmann::json;
using namespace specula;

const Tokenizer& tokenizer() {
    static const auto f = GGUFFile::open(test::shared_path("models/tinystories/stories260K.gguf"));
    static const auto tok = Tokenizer::from_gguf(*f);
    return *tok;
}

ResponseHead head(bool stream) {
    ResponseHead h{"chatcmpl-7", stream ? "chat.completion.chunk" : "chat.completion", 0, "m",
                   true};
    h.split_reasoning = true;
    h.parse_tools = true;
    return h;
}

const std::string kText =
    "<think>\nWeather needs a tool.\n</think>\n\nChecking.\n<tool_call>\n{\"name\": "
    "\"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n"
    "{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";

Completion completion(const std::string& text) {
    Completion c;
    c.text = text;
    c.finish_reason = "stop";
    return c;
}

TEST(ServerToolResponses, WholeResponse) {
    const json r = full_response(head(false), {completion(kText)}, tokenizer());
    const json& choice = r["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls");
    const json& m = choice["message"];
    EXPECT_EQ(m["reasoning_content"], "Weather needs a tool.");
    EXPECT_EQ(m["content"], "Checking.");
    ASSERT_EQ(m["tool_calls"].size(), 2u);
    EXPECT_EQ(
        m["tool_calls"][0],
        json({{"id", "call_7_0_0"},
              {"type", "function"},
              {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Paris"})"}}}}));
    EXPECT_EQ(m["tool_calls"][1]["function"]["name"], "now");

    ResponseHead one = head(false);
    one.parallel_tool_calls = false;
    EXPECT_EQ(
        full_response(one, {completion(kText)}, tokenizer())["choices"][0]["message"]["tool_calls"]
            .size(),
        1u);
    // No call: plain content, finish_reason as generated.
    const json plain = full_response(head(false), {completion("Just text.")}, tokenizer());
    EXPECT_EQ(plain["choices"][0]["message"]["content"], "Just text.");
    EXPECT_FALSE(plain["choices"][0]["message"].contains("tool_calls"));
    EXPECT_EQ(plain["choices"][0]["finish_reason"], "stop");
}

TEST(ServerToolResponses, StreamedInPiecesCutAnywhere) {
    const ResponseHead h = head(true);
    for (size_t cut = 0; cut <= kText.size(); cut += 3) {
        StreamCursor cursor = stream_cursor(h);
        Completion so_far;
        std::string reasoning, content;
        json calls;
        for (const std::string part : {kText.substr(0, cut), kText.substr(cut)}) {
            TokenPiece piece;
            piece.text = part;
            const json chunk = stream_chunk(h, 0, {piece}, so_far, tokenizer(), cursor);
            const json& d = chunk["choices"][0]["delta"];
            reasoning += d.value("reasoning_content", "");
            content += d.value("content", "");
            EXPECT_FALSE(d.contains("tool_calls"));
        }
        std::vector<json> last = stream_flush_chunks(h, 0, cursor);
        // The held text (when some was held), then per call its head and its arguments, as
        // OpenAI streams them.
        ASSERT_GE(last.size(), 4u) << cut;
        ASSERT_LE(last.size(), 5u) << cut;
        if (last.size() == 5) {
            const json& d = last[0]["choices"][0]["delta"];
            EXPECT_FALSE(d.contains("tool_calls"));
            reasoning += d.value("reasoning_content", "");
            content += d.value("content", "");
            last.erase(last.begin());
        }
        last.insert(last.begin(), json());  // numbered from 1 below
        EXPECT_EQ(reasoning, "Weather needs a tool.") << cut;
        EXPECT_EQ(content.find("<tool"), std::string::npos) << cut;
        EXPECT_EQ(content, "Checking.") << cut;  // as the whole response has it
        EXPECT_EQ(last[1]["choices"][0]["delta"],
                  json::parse(R"({"tool_calls": [{"index": 0, "id": "call_7_0_0", "type":
                      "function", "function": {"name": "get_weather", "arguments": ""}}]})"));
        EXPECT_EQ(last[2]["choices"][0]["delta"],
                  json::parse(R"({"tool_calls": [{"index": 0, "function": {"arguments":
                      "{\"city\":\"Paris\"}"}}]})"));
        EXPECT_EQ(last[3]["choices"][0]["delta"]["tool_calls"][0]["id"], "call_7_0_1");
        EXPECT_EQ(last[3]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "now");
        EXPECT_EQ(last[4]["choices"][0]["delta"]["tool_calls"][0]["index"], 1);
        EXPECT_EQ(last[4]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"], "{}");
        for (size_t k = 1; k < last.size(); ++k)
            EXPECT_TRUE(last[k]["choices"][0]["finish_reason"].is_null());
        EXPECT_TRUE(cursor.called_tools);
    }
}

}  // namespace

namespace {

// gpt-oss harmony through the same response path: the analysis channel is reasoning_content,
// the commentary call a tool call, whole or streamed.
TEST(ServerToolResponses, HarmonyFormat) {
    const std::string text =
        "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>"
        "commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Oslo\"}"
        "<|call|>";
    ResponseHead h = head(false);
    h.split_reasoning = false;  // the <think> splitter is off: harmony's parser splits
    h.tool_format = *parse_tool_call_format("harmony", "test");
    const json r = full_response(h, {completion(text)}, tokenizer());
    const json& m = r["choices"][0]["message"];
    EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
    EXPECT_EQ(m["reasoning_content"], "Need the weather.");
    EXPECT_TRUE(m["content"].is_null());
    EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], R"({"city":"Oslo"})");

    h.object = "chat.completion.chunk";
    StreamCursor cursor = stream_cursor(h);
    Completion so_far;
    std::string reasoning, content;
    for (size_t i = 0; i < text.size(); i += 5) {
        TokenPiece piece;
        piece.text = text.substr(i, 5);
        const json d =
            stream_chunk(h, 0, {piece}, so_far, tokenizer(), cursor)["choices"][0]["delta"];
        EXPECT_FALSE(d.contains("tool_calls"));
        content += d.value("content", "");
    }
    std::vector<json> calls;
    for (const json& c : stream_flush_chunks(h, 0, cursor)) {
        const json& d = c["choices"][0]["delta"];
        reasoning += d.value("reasoning_content", "");
        content += d.value("content", "");
        if (d.contains("tool_calls")) calls.push_back(d["tool_calls"][0]);
    }
    EXPECT_EQ(reasoning, "Need the weather.");
    EXPECT_EQ(content, "");
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
    EXPECT_EQ(calls[1]["function"]["arguments"], R"({"city":"Oslo"})");
}

}  // namespace
