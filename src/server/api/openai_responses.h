// OpenAI's Responses API (POST /v1/responses), the API Codex and the openai SDK's
// `client.responses` speak, as a stateless adapter over the chat completions path: a Responses
// request becomes the chat completion request it means, and the chat reply or stream becomes a
// Response object or the Responses event sequence.
//
// Request: `model`, `input` (a string, or items: messages with input_text / output_text parts
// (user, assistant, system, developer), function_call, function_call_output, reasoning),
// `instructions` (the system message), function `tools` ({"type": "function", "name",
// "parameters", ...}), `tool_choice` (auto, none, required, {"type": "function", "name"}),
// `parallel_tool_calls`, `max_output_tokens`, `temperature`, `top_p`, `reasoning.effort`
// (minimal / none: the template's enable_thinking off; low, medium, high: on), `text.format`
// (text, json_object, json_schema: the chat path's grammar), `stream`, `store` (false: nothing
// is ever stored, so true is a 400), `include` (reasoning.encrypted_content accepted: reasoning
// comes back as plain text, never encrypted), `prompt_cache_key`, `user`, `metadata`,
// Codex's `client_metadata` (the client's own bookkeeping),
// `truncation` "disabled". Stateless: `previous_response_id` and `conversation` are 400s (send
// the whole conversation in `input`). Tool types the server cannot run (web_search, file_search,
// image_generation, custom, ...) are 400s naming them, unless the server runs with
// --drop-unsupported-tools (then they are dropped and the response names them under
// "specula.dropped_tools"). Any other field is a 400 naming it.
//
// Response: {"id": "resp_...", "object": "response", "status": completed | incomplete, "output":
// [reasoning (reasoning_text content), message (output_text), function_call items], "usage":
// {input_tokens, input_tokens_details.cached_tokens, output_tokens, total_tokens},
// "incomplete_details": {"reason": "max_output_tokens"} when cut}. Stream: response.created,
// response.in_progress, per item output_item.added, content_part.added, output_text.delta /
// reasoning_text.delta / function_call_arguments.delta, their .done events, output_item.done,
// then response.completed (or response.incomplete) with the whole Response.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/protocol/api_error.h"
#include "server/serving/service.h"

namespace specula {

struct ResponsesRequest {
    nlohmann::ordered_json chat;             // the chat completion body it means
    std::vector<std::string> dropped_tools;  // tool types dropped (--drop-unsupported-tools)
    nlohmann::json echo;  // request fields the Response repeats (instructions, tools, ...)
};

// ApiError 400 naming the field for anything malformed, stateful or not supported.
ResponsesRequest responses_to_chat(const nlohmann::ordered_json& body, bool drop_unsupported_tools);

// The Response for a chat completion reply (one choice) and its Completion.
nlohmann::json chat_to_response(const nlohmann::json& chat_reply, const Completion& c,
                                const ResponsesRequest& req);

// The chat path's stream chunks of one choice as Responses events (SSE text).
class ResponseEventStream {
  public:
    ResponseEventStream(std::string id, std::string model, long created,
                        const ResponsesRequest& req);
    std::string start();                             // response.created, response.in_progress
    std::string chunk(const nlohmann::json& chunk);  // a chat.completion.chunk's delta
    std::string finish(const Completion& c, int n_prompt);  // the open item's end, completed

  private:
    std::string event(const char* type, nlohmann::json body);
    std::string close();  // the open item's .done events and output_item.done
    std::string open(nlohmann::json item);
    nlohmann::json base(const char* status) const;
    std::string id_, model_;
    long created_;
    const ResponsesRequest& req_;
    int seq_ = 0;
    nlohmann::json output_ = nlohmann::json::array();  // items so far (the open one last)
    bool open_ = false;
    std::string text_;  // the open item's text, reasoning or arguments so far
};

}  // namespace specula
