// Anthropic's Messages API over the chat path: see anthropic.h.
#include "server/api/anthropic.h"

#include <set>

#include "server/protocol/content_text.h"

namespace specula {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

// A system prompt or a tool result: a string, or text blocks (their texts joined).
std::string text_of(const ojson& content, const std::string& where) {
    return content_text(content, where, {"text"}, "\n");
}

// One user turn: its tool results become tool messages (first, as Anthropic orders them), its
// text one user message.
void user_turn(const ojson& content, const std::string& at, const std::set<std::string>& tool_ids,
               ojson& out) {
    if (content.is_string()) {
        out.push_back({{"role", "user"}, {"content", content}});
        return;
    }
    std::string text;
    for (size_t j = 0; j < content.size(); ++j) {
        const ojson& b = content[j];
        const std::string where = at + ".content[" + std::to_string(j) + "]";
        const std::string type = b.is_object() ? b.value("type", "") : "";
        if (type == "text" && b.contains("text") && b["text"].is_string()) {
            text += (text.empty() ? "" : "\n") + b["text"].get<std::string>();
        } else if (type == "tool_result") {
            const std::string id = b.value("tool_use_id", "");
            if (!tool_ids.count(id))
                bad_request("'" + where + "': tool_result for an unknown tool_use_id '" + id + "'",
                            where + ".tool_use_id");
            std::string result =
                b.contains("content") ? text_of(b["content"], where + ".content") : std::string();
            if (b.value("is_error", false)) result = "Error: " + result;
            out.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", result}});
        } else {
            bad_request("'" + where + "': block type '" + type +
                            "' is not supported in a user turn (text and tool_result are)",
                        where + ".type");
        }
    }
    if (!text.empty()) out.push_back({{"role", "user"}, {"content", text}});
}

// One assistant turn: text, thinking (the reasoning the template may show) and tool_use blocks.
void assistant_turn(const ojson& content, const std::string& at, std::set<std::string>& tool_ids,
                    ojson& out) {
    ojson m = {{"role", "assistant"}};
    if (content.is_string()) {
        m["content"] = content;
        out.push_back(m);
        return;
    }
    std::string text, thinking;
    ojson calls = ojson::array();
    for (size_t j = 0; j < content.size(); ++j) {
        const ojson& b = content[j];
        const std::string where = at + ".content[" + std::to_string(j) + "]";
        const std::string type = b.is_object() ? b.value("type", "") : "";
        if (type == "text" && b.contains("text") && b["text"].is_string()) {
            text += b["text"].get<std::string>();
        } else if (type == "thinking" && b.contains("thinking") && b["thinking"].is_string()) {
            thinking += b["thinking"].get<std::string>();
        } else if (type == "redacted_thinking") {
            continue;  // encrypted for another model: nothing this one can read
        } else if (type == "tool_use" && b.contains("id") && b["id"].is_string() &&
                   b.contains("name") && b["name"].is_string()) {
            const ojson input = b.contains("input") ? b["input"] : ojson::object();
            if (!input.is_object())
                bad_request("'" + where + ".input' must be an object", where + ".input");
            tool_ids.insert(b["id"].get<std::string>());
            calls.push_back({{"id", b["id"]},
                             {"type", "function"},
                             {"function", {{"name", b["name"]}, {"arguments", input.dump()}}}});
        } else {
            bad_request(
                "'" + where + "': block type '" + type +
                    "' is not supported in an assistant turn (text, thinking, tool_use are)",
                where + ".type");
        }
    }
    m["content"] = calls.empty() || !text.empty() ? ojson(text) : ojson(nullptr);
    if (!thinking.empty()) m["reasoning_content"] = thinking;
    if (!calls.empty()) m["tool_calls"] = calls;
    out.push_back(m);
}

ojson tools_of(const ojson& tools) {
    if (!tools.is_array()) bad_request("'tools' must be an array", "tools");
    ojson out = ojson::array();
    for (size_t i = 0; i < tools.size(); ++i) {
        const ojson& t = tools[i];
        const std::string at = "tools[" + std::to_string(i) + "]";
        if (!t.is_object()) bad_request("'" + at + "' must be an object", at);
        const std::string type = t.value("type", "custom");
        if (type != "custom")
            bad_request(
                "'" + at + "': tool type '" + type +
                    "' runs on Anthropic's servers and is not available here (custom tools with "
                    "an input_schema are)",
                at + ".type");
        if (!t.contains("name") || !t["name"].is_string())
            bad_request("'" + at + ".name' is required", at);
        if (!t.contains("input_schema") || !t["input_schema"].is_object())
            bad_request("'" + at + ".input_schema' must be a JSON schema object",
                        at + ".input_schema");
        ojson fn = {{"name", t["name"]}, {"parameters", t["input_schema"]}};
        if (t.contains("description")) fn["description"] = t["description"];
        out.push_back({{"type", "function"}, {"function", fn}});
    }
    return out;
}

void tool_choice_of(const ojson& c, ojson& out) {
    const std::string type = c.is_object() ? c.value("type", "") : "";
    if (type == "auto") {
        out["tool_choice"] = "auto";
    } else if (type == "any") {
        out["tool_choice"] = "required";
    } else if (type == "none") {
        out["tool_choice"] = "none";
    } else if (type == "tool" && c.contains("name") && c["name"].is_string()) {
        out["tool_choice"] = {{"type", "function"}, {"function", {{"name", c["name"]}}}};
    } else {
        bad_request(
            "'tool_choice' must be {\"type\": \"auto\" | \"any\" | \"none\"} or {\"type\": "
            "\"tool\", \"name\": ...}",
            "tool_choice");
    }
    if (c.contains("disable_parallel_tool_use"))
        out["parallel_tool_calls"] = !c["disable_parallel_tool_use"].get<bool>();
}

void thinking_of(const ojson& t, int64_t max_tokens, ojson& out) {
    const std::string type = t.is_object() ? t.value("type", "") : "";
    for (const auto& [k, v] : t.items())
        if (k != "type" && k != "budget_tokens" && k != "display")
            bad_request("'thinking." + k + "' is not supported", "thinking." + k);
    if (t.contains("display") && t["display"] != "summarized" && t["display"] != "omitted")
        bad_request("'thinking.display' must be \"summarized\" or \"omitted\"", "thinking.display");
    if (type == "disabled") {
        out["chat_template_kwargs"] = {{"enable_thinking", false}};
        return;
    }
    if (type == "adaptive") return;  // the model decides: the template's own default
    if (type != "enabled")
        bad_request("'thinking.type' must be \"enabled\", \"adaptive\" or \"disabled\"",
                    "thinking.type");
    if (!t.contains("budget_tokens") || !t["budget_tokens"].is_number_integer())
        bad_request("'thinking.budget_tokens' must be an integer", "thinking.budget_tokens");
    const int64_t budget = t["budget_tokens"].get<int64_t>();
    if (budget < 1 || budget >= max_tokens)
        bad_request("'thinking.budget_tokens' must be at least 1 and less than max_tokens",
                    "thinking.budget_tokens");
    out["chat_template_kwargs"] = {{"enable_thinking", true}};
}

std::string event(const char* name, const json& data) {
    // Model output may hold invalid UTF-8: replaced (U+FFFD), never thrown.
    return std::string("event: ") + name +
           "\ndata: " + data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

std::string stop_reason(const std::string& finish, const Completion& c, bool called_tools) {
    if (called_tools || finish == "tool_calls") return "tool_use";
    // A max_tokens past the context was cut to it (CompletionRequest::lenient_limits): a full
    // context is Anthropic's own stop reason for that.
    if (finish == "length")
        return c.stats.stop_reason == "context" ? "model_context_window_exceeded" : "max_tokens";
    if (c.text_stopped && !c.stop_word.empty()) return "stop_sequence";
    return "end_turn";
}

json usage_of(const Completion& c, int n_prompt) {
    return {{"input_tokens", n_prompt - c.n_cached},
            {"cache_read_input_tokens", c.n_cached},
            {"cache_creation_input_tokens", 0},
            {"output_tokens", c.stats.n_generated}};
}

}  // namespace

ojson messages_to_chat(const ojson& body) {
    if (!body.is_object()) bad_request("the request body must be a JSON object", "");
    static const std::set<std::string> known = {
        "model",       "max_tokens",     "system",      "messages",      "tools",
        "tool_choice", "stop_sequences", "temperature", "top_p",         "top_k",
        "stream",      "thinking",       "metadata",    "output_config", "context_management"};
    for (const auto& [k, v] : body.items())
        if (!known.count(k)) bad_request("'" + k + "' is not supported by this server", k);
    if (!body.contains("max_tokens") || !body["max_tokens"].is_number_integer() ||
        body["max_tokens"].get<int64_t>() < 1)
        bad_request("'max_tokens' is required: an integer >= 1", "max_tokens");
    if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
        bad_request("'messages' must be a non-empty array", "messages");
    ojson out;
    if (body.contains("model")) out["model"] = body["model"];
    ojson msgs = ojson::array();
    if (body.contains("system"))
        msgs.push_back({{"role", "system"}, {"content", text_of(body["system"], "system")}});
    std::set<std::string> tool_ids;
    const ojson& in = body["messages"];
    for (size_t i = 0; i < in.size(); ++i) {
        const ojson& m = in[i];
        const std::string at = "messages[" + std::to_string(i) + "]";
        const std::string role = m.is_object() ? m.value("role", "") : "";
        if (!m.is_object() || !m.contains("content") ||
            !(m["content"].is_string() || m["content"].is_array()))
            bad_request("'" + at + "' must have a content string or array of blocks", at);
        if (role == "user") {
            user_turn(m["content"], at, tool_ids, msgs);
        } else if (role == "assistant") {
            assistant_turn(m["content"], at, tool_ids, msgs);
        } else if (role == "system") {  // Claude Code's turn-level instructions
            msgs.push_back(
                {{"role", "system"}, {"content", text_of(m["content"], at + ".content")}});
        } else {
            bad_request("'" + at + ".role' must be \"user\", \"assistant\" or \"system\"",
                        at + ".role");
        }
    }
    out["messages"] = msgs;
    out["max_tokens"] = body["max_tokens"];
    if (body.contains("tools") && !body["tools"].empty()) out["tools"] = tools_of(body["tools"]);
    if (body.contains("tool_choice")) tool_choice_of(body["tool_choice"], out);
    if (body.contains("stop_sequences")) out["stop"] = body["stop_sequences"];
    for (const char* k : {"temperature", "top_p", "top_k", "stream"})
        if (body.contains(k)) out[k] = body[k];
    if (body.contains("thinking"))
        thinking_of(body["thinking"], body["max_tokens"].get<int64_t>(), out);
    // Claude Code's: the effort (the template's thinking switch where it has one: advisory, as
    // Claude's effort also tunes length), and context edits that keep everything (the neutral
    // value; the conversation is never edited here).
    if (body.contains("output_config")) {
        const ojson& oc = body["output_config"];
        if (!oc.is_object()) bad_request("'output_config' must be an object", "output_config");
        for (const auto& [k, v] : oc.items()) {
            if (k != "effort")
                bad_request("'output_config." + k + "' is not supported", "output_config." + k);
            const std::string e = v.is_string() ? v.get<std::string>() : "";
            if (e != "low" && e != "medium" && e != "high" && e != "max" && e != "xhigh")
                bad_request("'output_config.effort' must be low, medium, high, xhigh or max",
                            "output_config.effort");
            if (!out.contains("chat_template_kwargs"))
                out["reasoning_effort"] = e == "max" ? "xhigh" : e;
        }
    }
    if (body.contains("context_management")) {
        const ojson& cm = body["context_management"];
        const ojson edits = cm.is_object() && cm.contains("edits") ? cm["edits"] : ojson();
        bool neutral = cm.is_object() && cm.size() == 1 && edits.is_array();
        for (const ojson& e : edits.is_array() ? edits : ojson::array())
            neutral = neutral && e.is_object() && e.value("keep", "") == "all" &&
                      e.value("type", "").rfind("clear_thinking", 0) == 0;
        if (!neutral)
            bad_request(
                "'context_management': only edits that keep everything (clear_thinking "
                "with keep \"all\") are supported; the conversation is never edited here",
                "context_management");
    }
    if (body.contains("metadata")) {
        const ojson& md = body["metadata"];
        if (!md.is_object()) bad_request("'metadata' must be an object", "metadata");
        for (const auto& [k, v] : md.items())
            if (k != "user_id")
                bad_request("'metadata." + k + "' is not supported", "metadata." + k);
    }
    return out;
}

json anthropic_error(const ApiError& e) {
    const int s = e.status();
    const char* type = s == 401   ? "authentication_error"
                       : s == 404 ? "not_found_error"
                       : s == 413 ? "request_too_large"
                       : s == 429 ? "rate_limit_error"
                       : s == 503 ? "overloaded_error"
                       : s >= 500 ? "api_error"
                                  : "invalid_request_error";
    return {{"type", "error"}, {"error", {{"type", type}, {"message", e.what()}}}};
}

json chat_to_message(const json& r, const Completion& c, bool hide_thinking) {
    const json& choice = r["choices"][0];
    const json& m = choice["message"];
    json content = json::array();
    if (!hide_thinking && m.contains("reasoning_content") && m["reasoning_content"].is_string() &&
        !m["reasoning_content"].get<std::string>().empty())
        content.push_back(
            {{"type", "thinking"}, {"thinking", m["reasoning_content"]}, {"signature", ""}});
    if (m["content"].is_string() && !m["content"].get<std::string>().empty())
        content.push_back({{"type", "text"}, {"text", m["content"]}});
    const bool called = m.contains("tool_calls");
    if (called) {
        for (const json& tc : m["tool_calls"]) {
            json input = json::parse(tc["function"]["arguments"].get<std::string>(), nullptr,
                                     /*allow_exceptions=*/false);
            if (!input.is_object()) input = json::object();
            content.push_back({{"type", "tool_use"},
                               {"id", tc["id"]},
                               {"name", tc["function"]["name"]},
                               {"input", input}});
        }
    }
    const std::string reason = stop_reason(choice["finish_reason"].get<std::string>(), c, called);
    json out = {{"id", "msg_" + r["id"].get<std::string>()},
                {"type", "message"},
                {"role", "assistant"},
                {"model", r["model"]},
                {"content", content},
                {"stop_reason", reason},
                {"stop_sequence", reason == "stop_sequence" ? json(c.stop_word) : json(nullptr)},
                {"usage", usage_of(c, r["usage"]["prompt_tokens"].get<int>())}};
    if (r["usage"].contains("speculative")) out["specula"] = r["usage"]["speculative"];
    return out;
}

MessageStream::MessageStream(std::string id, std::string model, int n_prompt, int n_cached,
                             bool hide_thinking)
    : id_("msg_" + std::move(id)),
      model_(std::move(model)),
      n_prompt_(n_prompt),
      n_cached_(n_cached),
      hide_thinking_(hide_thinking) {}

std::string MessageStream::start() const {
    const json message = {{"id", id_},
                          {"type", "message"},
                          {"role", "assistant"},
                          {"model", model_},
                          {"content", json::array()},
                          {"stop_reason", nullptr},
                          {"stop_sequence", nullptr},
                          {"usage",
                           {{"input_tokens", n_prompt_ - n_cached_},
                            {"cache_read_input_tokens", n_cached_},
                            {"cache_creation_input_tokens", 0},
                            {"output_tokens", 0}}}};
    return event("message_start", {{"type", "message_start"}, {"message", message}}) +
           event("ping", {{"type", "ping"}});
}

std::string MessageStream::open(const std::string& kind, json block) {
    std::string out = close();
    kind_ = kind;
    ++index_;
    return out + event("content_block_start", {{"type", "content_block_start"},
                                               {"index", index_},
                                               {"content_block", std::move(block)}});
}

std::string MessageStream::close() {
    if (kind_.empty()) return "";
    kind_.clear();
    return event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
}

std::string MessageStream::chunk(const json& chunk) {
    if (!chunk.contains("choices") || chunk["choices"].empty()) return "";
    const json& choice = chunk["choices"][0];
    if (!choice.contains("delta")) return "";
    const json& d = choice["delta"];
    std::string out;
    const auto delta = [&](json body) {
        out += event("content_block_delta",
                     {{"type", "content_block_delta"}, {"index", index_}, {"delta", body}});
    };
    if (!hide_thinking_ && d.contains("reasoning_content") && d["reasoning_content"].is_string() &&
        !d["reasoning_content"].get<std::string>().empty()) {
        if (kind_ != "thinking")
            out += open("thinking", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
        delta({{"type", "thinking_delta"}, {"thinking", d["reasoning_content"]}});
    }
    if (d.contains("content") && d["content"].is_string() &&
        !d["content"].get<std::string>().empty()) {
        if (kind_ != "text") out += open("text", {{"type", "text"}, {"text", ""}});
        delta({{"type", "text_delta"}, {"text", d["content"]}});
    }
    if (d.contains("tool_calls")) {
        for (const json& tc : d["tool_calls"]) {
            if (tc.contains("id")) {
                out += open("tool_use", {{"type", "tool_use"},
                                         {"id", tc["id"]},
                                         {"name", tc["function"]["name"]},
                                         {"input", json::object()}});
                tool_ = tc.value("index", 0);
            }
            const std::string args = tc.contains("function") && tc["function"].contains("arguments")
                                         ? tc["function"]["arguments"].get<std::string>()
                                         : std::string();
            if (!args.empty() && kind_ == "tool_use")
                delta({{"type", "input_json_delta"}, {"partial_json", args}});
        }
    }
    return out;
}

std::string MessageStream::finish(const Completion& c, bool called_tools) {
    std::string out = close();
    const std::string reason = stop_reason(c.finish_reason, c, called_tools);
    out +=
        event("message_delta",
              {{"type", "message_delta"},
               {"delta",
                {{"stop_reason", reason},
                 {"stop_sequence", reason == "stop_sequence" ? json(c.stop_word) : json(nullptr)}}},
               {"usage", {{"output_tokens", c.stats.n_generated}}}});
    return out + event("message_stop", {{"type", "message_stop"}});
}

}  // namespace specula
