// Model output through the chat reply path, whole and streamed (test_chat_model_output and
// fuzz_model_output): the reasoning split and a tool-call format's parser over the whole text, as
// a non-streamed reply does, against the ReasoningSplitter and ToolCallGate fed the same text in
// pieces, as a streamed one does. Both must agree on content, reasoning and calls for any bytes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "chat/reasoning.h"
#include "chat/tool_calls.h"

namespace specula::test {

struct ReplyParts {
    std::string content, reasoning;
    std::vector<ToolCall> calls;
};

inline bool operator==(const ReplyParts& a, const ReplyParts& b) {
    if (a.content != b.content || a.reasoning != b.reasoning || a.calls.size() != b.calls.size())
        return false;
    for (size_t i = 0; i < a.calls.size(); ++i)
        if (a.calls[i].name != b.calls[i].name || a.calls[i].arguments != b.calls[i].arguments)
            return false;
    return true;
}

struct ReplyMode {
    bool split_reasoning = false;  // --reasoning-format deepseek
    bool starts_open = false;      // the prompt opened <think>
};

// A non-streamed reply (server/api/responses.cpp's full_response).
inline ReplyParts whole_reply(ToolCallFormat f, std::string_view text, ReplyMode m,
                              const nlohmann::ordered_json& tools) {
    ReasoningParts parts;
    if (m.split_reasoning)
        parts = split_reasoning(text, m.starts_open);
    else
        parts.content = std::string(text);
    ParsedToolCalls p = parse_tool_calls(f, parts.content, tools);
    return {std::move(p.content), parts.reasoning + p.reasoning, std::move(p.calls)};
}

// A streamed one (stream_chunk per piece, then stream_flush_chunks).
inline ReplyParts streamed_reply(ToolCallFormat f, const std::vector<std::string_view>& pieces,
                                 ReplyMode m, const nlohmann::ordered_json& tools) {
    ReasoningSplitter splitter(m.starts_open);
    ToolCallGate gate(f);
    ReplyParts out;
    for (std::string_view piece : pieces) {
        ReasoningParts parts;
        if (m.split_reasoning)
            parts = splitter.push(piece);
        else
            parts.content = std::string(piece);
        out.reasoning += parts.reasoning;
        out.content += gate.push(parts.content);
    }
    ReasoningParts rest;
    if (m.split_reasoning) rest = splitter.finish();
    out.reasoning += rest.reasoning;
    out.content += gate.push(rest.content);
    ParsedToolCalls p = gate.finish(tools);
    out.content += p.content;
    out.reasoning += p.reasoning;
    out.calls = std::move(p.calls);
    return out;
}

// `text` cut at the given offsets (sorted, each in (0, size)).
inline std::vector<std::string_view> cut(std::string_view text, const std::vector<size_t>& at) {
    std::vector<std::string_view> pieces;
    size_t from = 0;
    for (size_t a : at) {
        pieces.push_back(text.substr(from, a - from));
        from = a;
    }
    pieces.push_back(text.substr(from));
    return pieces;
}

// Tools whose parameters have types (qwen3-coder reads them).
inline const nlohmann::ordered_json& reply_tools() {
    static const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}},
      {"type": "function", "function": {"name": "f", "parameters": {"type": "object",
        "properties": {"x": {"type": "number"}}}}}])");
    return tools;
}

}  // namespace specula::test
