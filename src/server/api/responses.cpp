// Response bodies: see responses.h.
#include "server/api/responses.h"

#include <algorithm>

#include "speculative/draft_trace.h"

namespace specula {

namespace {

using json = nlohmann::json;

json speculative_json(const std::vector<Completion>& choices) {
    long drafts = 0, drafted = 0, accepted = 0, passes = 0;
    std::vector<long> per_pos;
    for (const Completion& c : choices) {
        drafts += c.stats.n_drafts;
        drafted += c.stats.n_drafted;
        accepted += c.stats.n_accepted;
        passes += c.stats.n_target_passes;
        const auto& pa = c.stats.pos_accepted;
        if (per_pos.size() < pa.size()) per_pos.resize(pa.size(), 0);
        for (size_t i = 0; i < pa.size(); ++i) per_pos[i] += pa[i];
    }
    return {
        {"drafts", drafts},
        {"drafted", drafted},
        {"accepted", accepted},
        {"accepted_per_pos", per_pos},
        {"acceptance_rate", drafted > 0 ? double(accepted) / double(drafted) : 0.0},
        {"mean_acceptance_length", passes > 0 ? double(accepted + passes) / double(passes) : 0.0}};
}

json tokens_json(const std::vector<TokenPiece>& pieces) {
    json toks = json::array();
    for (const auto& p : pieces) toks.push_back({{"text", p.text}, {"drafted", p.drafted}});
    return {{"tokens", toks}};
}

std::string joined(const std::vector<TokenPiece>& pieces) {
    std::string s;
    for (const auto& p : pieces) s += p.text;
    return s;
}

// The logprobs of generated tokens [from, to) (completions: after the echoed prompt's).
json logprobs_json(const ResponseHead& h, const Completion& c, size_t from, size_t to,
                   bool with_prompt, const Tokenizer& tok) {
    if (h.logprobs < 0) return nullptr;
    to = std::min(to, c.logprobs.size());
    from = std::min(from, to);
    const std::vector<TokenLogprob> part(c.logprobs.begin() + long(from),
                                         c.logprobs.begin() + long(to));
    if (h.chat) return chat_logprobs_json(part, tok);
    if (!with_prompt || !h.echo) return completion_logprobs_json({}, part, tok);
    return completion_logprobs_json(with_top(c.prompt_logprobs, h.logprobs), part, tok);
}

// A chat delta of reasoning and/or content (an empty object when both are empty).
json split_delta(const ReasoningParts& parts) {
    json d = json::object();
    if (!parts.reasoning.empty()) d["reasoning_content"] = parts.reasoning;
    if (!parts.content.empty()) d["content"] = parts.content;
    return d;
}

// OpenAI's tool_calls array; ids are unique per response, choice and call.
json tool_calls_json(const ResponseHead& h, int choice, const std::vector<ToolCall>& calls,
                     bool streamed) {
    json out = json::array();
    const std::string base =
        "call_" + h.id.substr(h.id.find('-') + 1) + "_" + std::to_string(choice) + "_";
    for (size_t k = 0; k < calls.size() && (h.parallel_tool_calls || k == 0); ++k) {
        json c = {{"id", base + std::to_string(k)},
                  {"type", "function"},
                  {"function", {{"name", calls[k].name}, {"arguments", calls[k].arguments}}}};
        if (streamed) c["index"] = int(k);
        out.push_back(std::move(c));
    }
    return out;
}

json with_choice(const ResponseHead& h, json choice) {
    json j = h.make();
    j["choices"] = json::array({std::move(choice)});
    return j;
}

}  // namespace

json ResponseHead::make() const {
    return {{"id", id}, {"object", object}, {"created", created}, {"model", model}};
}

json timings_json(const std::vector<Completion>& choices) {
    int prompt_n = 0, predicted_n = 0;
    double prompt_ms = 0, predicted_ms = 0;
    long draft_n = 0, draft_accepted = 0, forced_n = 0, forced_accepted = 0;
    bool drafting = false;
    for (const Completion& c : choices) {
        prompt_n += c.stats.n_prompt - c.stats.n_prompt_cached;
        prompt_ms += c.stats.t_prompt_ms;
        predicted_n += c.stats.n_generated;
        predicted_ms += c.stats.t_gen_ms;
        draft_n += c.stats.n_drafted;
        draft_accepted += c.stats.n_accepted;
        forced_n += c.stats.n_forced;
        forced_accepted += c.stats.n_forced_accepted;
        drafting = drafting || !c.stats.drafter.empty();
    }
    const auto per_token = [](double ms, int n) { return n > 0 ? ms / n : 0.0; };
    const auto per_second = [](double ms, int n) { return ms > 0 ? n * 1e3 / ms : 0.0; };
    json t = {{"prompt_n", prompt_n},
              {"prompt_ms", prompt_ms},
              {"prompt_per_token_ms", per_token(prompt_ms, prompt_n)},
              {"prompt_per_second", per_second(prompt_ms, prompt_n)},
              {"predicted_n", predicted_n},
              {"predicted_ms", predicted_ms},
              {"predicted_per_token_ms", per_token(predicted_ms, predicted_n)},
              {"predicted_per_second", per_second(predicted_ms, predicted_n)}};
    if (drafting) {
        t["draft_n"] = draft_n;
        t["draft_n_accepted"] = draft_accepted;
    }
    if (forced_n > 0) {
        t["draft_n_forced"] = forced_n;
        t["draft_n_forced_accepted"] = forced_accepted;
    }
    return t;
}

json usage_json(const std::vector<Completion>& choices) {
    const int prompt = choices.empty() ? 0 : choices[0].stats.n_prompt;
    long completion = 0;
    for (const Completion& c : choices) completion += c.stats.n_generated;
    return {
        {"prompt_tokens", prompt},
        {"completion_tokens", completion},
        {"total_tokens", prompt + completion},
        {"prompt_tokens_details", {{"cached_tokens", choices.empty() ? 0 : choices[0].n_cached}}},
        {"speculative", speculative_json(choices)}};
}

json stream_chunk(const ResponseHead& h, int index, const std::vector<TokenPiece>& pieces,
                  const Completion& c, const Tokenizer& tok, StreamCursor& cursor) {
    json choice = {{"index", index}, {"finish_reason", nullptr}, {"specula", tokens_json(pieces)}};
    // The tokens whose first text is in this chunk.
    int upto = cursor.next_logprob;
    for (const auto& p : pieces) upto = std::max(upto, p.index + 1);
    json lp = logprobs_json(h, c, size_t(cursor.next_logprob), size_t(upto), false, tok);
    cursor.next_logprob = upto;
    if (h.chat && (h.split_reasoning || h.parse_tools)) {
        ReasoningParts parts;
        if (h.split_reasoning) {
            parts = cursor.splitter.push(joined(pieces));
        } else {
            parts.content = joined(pieces);
        }
        if (h.parse_tools) parts.content = cursor.gate.push(parts.content);
        choice["delta"] = split_delta(parts);
    } else if (h.chat) {
        choice["delta"] = {{"content", joined(pieces)}};
    } else {
        choice["text"] = joined(pieces);
    }
    choice["logprobs"] = lp;
    return with_choice(h, choice);
}

StreamCursor stream_cursor(const ResponseHead& h) {
    StreamCursor c;
    c.splitter = ReasoningSplitter(h.reasoning_open);
    c.gate = ToolCallGate(h.tool_format);
    return c;
}

std::vector<json> stream_flush_chunks(const ResponseHead& h, int index, StreamCursor& cursor) {
    std::vector<json> out;
    if (!h.chat || !(h.split_reasoning || h.parse_tools)) return out;
    const auto chunk = [&](json delta) {
        out.push_back(with_choice(h, {{"index", index},
                                      {"finish_reason", nullptr},
                                      {"logprobs", nullptr},
                                      {"delta", std::move(delta)}}));
    };
    ReasoningParts rest;
    if (h.split_reasoning) rest = cursor.splitter.finish();
    json calls = json::array();
    if (h.parse_tools) {
        rest.content = cursor.gate.push(rest.content);
        const ParsedToolCalls parsed = cursor.gate.finish(h.tools);
        rest.content += parsed.content;
        rest.reasoning += parsed.reasoning;
        if (!parsed.calls.empty()) {
            calls = tool_calls_json(h, index, parsed.calls, /*streamed=*/true);
            cursor.called_tools = true;
        }
    }
    if (!rest.empty()) chunk(split_delta(rest));
    for (json& call : calls) {  // the call's head, then its arguments
        const std::string args = call["function"]["arguments"];
        call["function"]["arguments"] = "";
        chunk({{"tool_calls", json::array({call})}});
        chunk({{"tool_calls",
                json::array({{{"index", call["index"]}, {"function", {{"arguments", args}}}}})}});
    }
    return out;
}

json stream_start_chunk(const ResponseHead& h, int index, const Completion& c,
                        const Tokenizer& tok) {
    json choice = {{"index", index}, {"finish_reason", nullptr}, {"logprobs", nullptr}};
    if (h.chat) {
        choice["delta"] = {{"role", "assistant"}, {"content", ""}};
    } else {
        choice["text"] = c.echo;
        if (h.echo && h.logprobs >= 0 && !c.prompt_logprobs.empty())
            choice["logprobs"] =
                completion_logprobs_json(with_top(c.prompt_logprobs, h.logprobs), {}, tok);
    }
    return with_choice(h, choice);
}

json finish_chunk(const ResponseHead& h, int index, const Completion& c) {
    json choice = {
        {"index", index},
        {"finish_reason", c.finish_reason},
        {"logprobs", nullptr},
        {"specula", {{"tokens", json::array()}, {"speculative", speculative_json({c})}}}};
    if (h.chat) {
        choice["delta"] = json::object();
    } else {
        choice["text"] = "";
    }
    if (h.trace) choice["speculative_trace"] = draft_trace_json(c.stats.trace, c.stats.drafter);
    json j = with_choice(h, choice);
    j["timings"] = timings_json({c});
    return j;
}

json usage_chunk(const ResponseHead& h, const std::vector<Completion>& choices) {
    json j = h.make();
    j["choices"] = json::array();
    j["usage"] = usage_json(choices);
    j["timings"] = timings_json(choices);
    return j;
}

json full_response(const ResponseHead& h, const std::vector<Completion>& choices,
                   const Tokenizer& tok) {
    json list = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
        const Completion& c = choices[i];
        json choice = {{"index", int(i)},
                       {"finish_reason", c.finish_reason},
                       {"logprobs", logprobs_json(h, c, 0, size_t(c.n_text_tokens), true, tok)}};
        if (h.chat && (h.split_reasoning || h.parse_tools)) {
            ReasoningParts parts;
            if (h.split_reasoning) {
                parts = split_reasoning(c.text, h.reasoning_open);
            } else {
                parts.content = c.text;
            }
            json message = {{"role", "assistant"}, {"content", parts.content}};
            if (!parts.reasoning.empty()) message["reasoning_content"] = parts.reasoning;
            if (h.parse_tools) {
                const ParsedToolCalls parsed =
                    parse_tool_calls(h.tool_format, parts.content, h.tools);
                if (!parsed.reasoning.empty())
                    message["reasoning_content"] = parts.reasoning + parsed.reasoning;
                message["content"] = parsed.content;
                if (!parsed.calls.empty()) {
                    message["content"] =
                        parsed.content.empty() ? json(nullptr) : json(parsed.content);
                    message["tool_calls"] =
                        tool_calls_json(h, int(i), parsed.calls, /*streamed=*/false);
                    if (c.finish_reason == "stop") choice["finish_reason"] = "tool_calls";
                }
            }
            choice["message"] = std::move(message);
        } else if (h.chat) {
            choice["message"] = {{"role", "assistant"}, {"content", c.text}};
        } else {
            choice["text"] = c.echo + c.text;
            if (h.prompt_logprobs >= 0)
                choice["prompt_logprobs"] =
                    prompt_logprobs_json(c.prompt_logprobs, h.prompt_logprobs, tok);
        }
        if (h.trace) choice["speculative_trace"] = draft_trace_json(c.stats.trace, c.stats.drafter);
        list.push_back(choice);
    }
    json j = h.make();
    j["choices"] = list;
    if (h.chat && h.prompt_logprobs >= 0 && !choices.empty())  // vLLM: once, beside the choices
        j["prompt_logprobs"] =
            prompt_logprobs_json(choices[0].prompt_logprobs, h.prompt_logprobs, tok);
    j["usage"] = usage_json(choices);
    j["timings"] = timings_json(choices);
    return j;
}

}  // namespace specula
