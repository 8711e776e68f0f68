// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens), the API Claude Code
// and the Anthropic SDKs speak, as an adapter over the chat completions path: a Messages request
// becomes the chat completion request it means (an OpenAI chat body), and the chat reply or its
// stream becomes Anthropic's message or event sequence. Everything between (templates, tools,
// reasoning split, grammars, speculation) is the chat path's.
//
// Request: `model`, `max_tokens` (required), `system` (a string or text blocks), `messages` (user
// and assistant turns; content a string or blocks: text, image refused, tool_use, tool_result,
// thinking, redacted_thinking dropped), `tools` (custom tools with `input_schema`; server tools
// such as web_search are refused naming their type), `tool_choice` (auto, any, tool, none;
// disable_parallel_tool_use), `stop_sequences`, `temperature`, `top_p`, `top_k`, `stream`,
// `thinking` ({"type": "enabled", "budget_tokens": N} / "disabled": the template's
// enable_thinking switch; "adaptive": the template's default; the budget must be below
// max_tokens, and thinking ends when the model ends it or at max_tokens; display "omitted"
// leaves thinking blocks out), `metadata` (its user_id only: logged nowhere, changes nothing),
// Claude Code's `output_config.effort` (the template's thinking switch where it has one) and
// `context_management` edits that keep everything. A max_tokens past the context is cut to it
// (Claude Code sends 128000). Any other field is refused with a 400 naming it, in Anthropic's
// error shape.
//
// Reply: {"id": "msg_...", "type": "message", "role": "assistant", "model", "content": [thinking,
// text, tool_use blocks], "stop_reason": end_turn | max_tokens | stop_sequence | tool_use |
// model_context_window_exceeded (a max_tokens past the context, cut to it, reached),
// "stop_sequence", "usage": {input_tokens, output_tokens, cache_read_input_tokens}}; the
// speculative statistics ride along under "specula" as on chat replies. Stream: message_start,
// a ping, per block content_block_start / _delta (text_delta, thinking_delta, input_json_delta)
// / _stop, message_delta (stop_reason, usage), message_stop.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/protocol/api_error.h"
#include "server/serving/service.h"

namespace specula {

// The chat completion body a Messages request means (keys in the order the template should see
// them). ApiError 400 naming the field for anything malformed or not supported.
nlohmann::ordered_json messages_to_chat(const nlohmann::ordered_json& body);

// Anthropic's error body: {"type": "error", "error": {"type", "message"}}.
nlohmann::json anthropic_error(const ApiError& e);

// The Messages reply for a chat completion reply (one choice) and its Completion (stop string).
// hide_thinking (thinking.display "omitted"): no thinking blocks.
nlohmann::json chat_to_message(const nlohmann::json& chat_reply, const Completion& c,
                               bool hide_thinking = false);

// Turns the chat path's stream chunks of one choice into Anthropic's events (SSE text, "event:"
// and "data:" lines), keeping which block is open.
class MessageStream {
  public:
    MessageStream(std::string id, std::string model, int n_prompt, int n_cached,
                  bool hide_thinking = false);
    std::string start() const;                       // message_start and a ping
    std::string chunk(const nlohmann::json& chunk);  // a chat.completion.chunk's delta
    // The open block's stop, message_delta with the stop reason and usage, message_stop.
    std::string finish(const Completion& c, bool called_tools);

  private:
    std::string open(const std::string& kind, nlohmann::json block);
    std::string close();
    std::string id_, model_;
    int n_prompt_, n_cached_;
    bool hide_thinking_;
    int index_ = -1;    // the open block's index; -1: none yet
    std::string kind_;  // the open block's type: "text", "thinking", "tool_use", ""
    int tool_ = -1;     // the open tool_use block's tool call index
};

}  // namespace specula
