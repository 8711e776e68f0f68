// The JSON bodies of completion responses and SSE chunks, in OpenAI's shapes, for n choices:
// text / message, finish_reason, logprobs (server/serving/logprobs.h), echo, usage with the
// speculative block, and each chunk's `specula` object (its tokens and whether each was an accepted
// draft).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/reasoning.h"
#include "chat/tool_calls.h"
#include "server/serving/service.h"

namespace specula {

// The fields every response and chunk starts with.
struct ResponseHead {
    std::string id;
    std::string object;
    long created;
    std::string model;
    bool chat;
    int logprobs = -1;  // the request's (req.logprobs)
    // chat: the text's <think> block goes to reasoning_content (PreparedRequest's flags).
    bool split_reasoning = false, reasoning_open = false;
    // chat with tools: calls in the content (in tool_format, chat/tool_calls.h) become
    // tool_calls (finish_reason "tool_calls"); parallel_tool_calls false keeps the first only.
    bool parse_tools = false, parallel_tool_calls = true;
    // llama-server's native /completion (server/api/native_responses.h): its shapes instead of
    // OpenAI's; the prompt's token count and the generation settings it echoes.
    bool native = false;
    int n_prompt = 0;
    nlohmann::json settings;
    ToolCallFormat tool_format = ToolCallFormat::hermes;
    nlohmann::ordered_json tools = nullptr;  // the request's (qwen3-coder types arguments by them)
    bool anthropic = false;      // Anthropic's Messages shapes (server/api/anthropic.h) over chat's
    bool hide_thinking = false;  // Anthropic's thinking.display "omitted": no thinking blocks
    // OpenAI's Responses shapes (server/api/openai_responses.h) over chat's: the request it echoes.
    std::shared_ptr<const struct ResponsesRequest> responses;
    // "speculative": {"trace": true}: each choice carries "speculative_trace" (the whole response's
    // choices; when streaming, the choice's finish chunk), speculative/draft_trace.h's steps.
    bool trace = false;
    bool echo = false;         // completions: the prompt comes first (with logprobs, theirs too)
    int prompt_logprobs = -1;  // vLLM's (req.prompt_logprobs): completions per choice, chat once
    nlohmann::json make() const;
};

// Usage over all choices: the prompt once, every choice's generated tokens, and the speculative
// block (drafts, drafted, accepted, accepted_per_pos summed; rates over the sums).
nlohmann::json usage_json(const std::vector<Completion>& choices);

// llama-server's `timings` over all choices: prompt_n (tokens evaluated, cached ones not
// counted), prompt_ms, prompt_per_token_ms, prompt_per_second, predicted_n, predicted_ms,
// predicted_per_token_ms, predicted_per_second and, when a drafter ran, draft_n and
// draft_n_accepted, and when a grammar forced drafts (speculative/drafters/forced_drafts.h)
// draft_n_forced and draft_n_forced_accepted. On every full response, on the chunk with
// finish_reason and the usage chunk.
nlohmann::json timings_json(const std::vector<Completion>& choices);

// Tracks which generated tokens' logprobs a stream has sent (a token's entry goes out with the
// chunk that carries the first of its text).
struct StreamCursor {
    int next_logprob = 0;
    ReasoningSplitter splitter;  // with split_reasoning: set from the head before the first chunk
    ToolCallGate gate;           // with parse_tools: content from the first call is held
    bool called_tools = false;   // the flush sent tool_calls
};

// A cursor for one streamed choice.
StreamCursor stream_cursor(const ResponseHead& h);

// A chunk of released text for choice `index` (`c`: the choice so far, for its logprobs).
nlohmann::json stream_chunk(const ResponseHead& h, int index, const std::vector<TokenPiece>& pieces,
                            const Completion& c, const Tokenizer& tok, StreamCursor& cursor);
// The first chunk of a choice: chat's role, or completions' echoed prompt.
nlohmann::json stream_start_chunk(const ResponseHead& h, int index, const Completion& c,
                                  const Tokenizer& tok);
// The text held back (reasoning splitter, tool-call gate) as a last delta, then each held tool
// call as OpenAI streams one: a delta with its index, id, type and function {name, arguments:
// ""}, then one with its index and function {arguments}; none when nothing was held.
std::vector<nlohmann::json> stream_flush_chunks(const ResponseHead& h, int index,
                                                StreamCursor& cursor);
// The chunk with the choice's finish_reason (and, in `specula`, its speculative block).
nlohmann::json finish_chunk(const ResponseHead& h, int index, const Completion& c);
// stream_options.include_usage: the last chunk, with "choices": [] and the usage.
nlohmann::json usage_chunk(const ResponseHead& h, const std::vector<Completion>& choices);

nlohmann::json full_response(const ResponseHead& h, const std::vector<Completion>& choices,
                             const Tokenizer& tok);

}  // namespace specula
