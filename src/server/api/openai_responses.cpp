// OpenAI's Responses API over the chat path: see openai_responses.h.
#include "server/api/openai_responses.h"

#include <set>

#include "server/protocol/content_text.h"

namespace specula {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

// A message item's content: a string, or text parts whose texts are joined.
std::string text_of(const ojson& content, const std::string& where) {
    return content_text(content, where,
                        {"input_text", "output_text", "text", "summary_text", "reasoning_text"},
                        "");
}

// The input items as chat messages: function calls join the assistant message before them,
// reasoning goes to the next assistant message's reasoning_content.
void input_items(const ojson& input, ojson& msgs) {
    std::set<std::string> call_ids;
    std::string reasoning;  // waiting for its assistant message
    const auto assistant = [&]() -> ojson& {
        if (msgs.empty() || msgs.back()["role"] != "assistant" || !reasoning.empty()) {
            msgs.push_back({{"role", "assistant"}, {"content", nullptr}});
            if (!reasoning.empty()) msgs.back()["reasoning_content"] = reasoning;
            reasoning.clear();
        }
        return msgs.back();
    };
    for (size_t i = 0; i < input.size(); ++i) {
        const ojson& it = input[i];
        const std::string at = "input[" + std::to_string(i) + "]";
        if (!it.is_object()) bad_request("'" + at + "' must be an object", at);
        const std::string type = it.value("type", it.contains("role") ? "message" : "");
        if (type == "message") {
            std::string role = it.value("role", "");
            if (role == "developer") role = "system";
            if (role != "user" && role != "assistant" && role != "system")
                bad_request("'" + at + ".role' must be user, assistant, system or developer",
                            at + ".role");
            if (!it.contains("content"))
                bad_request("'" + at + ".content' is required", at + ".content");
            const std::string text = text_of(it["content"], at + ".content");
            if (role == "assistant") {
                ojson& m = assistant();
                m["content"] =
                    m["content"].is_string() ? m["content"].get<std::string>() + text : text;
            } else {
                msgs.push_back({{"role", role}, {"content", text}});
            }
        } else if (type == "function_call") {
            for (const char* k : {"call_id", "name", "arguments"})
                if (!it.contains(k) || !it[k].is_string())
                    bad_request("'" + at + "." + k + "' must be a string", at + "." + k);
            call_ids.insert(it["call_id"].get<std::string>());
            ojson& m = assistant();
            if (!m.contains("tool_calls")) m["tool_calls"] = ojson::array();
            m["tool_calls"].push_back(
                {{"id", it["call_id"]},
                 {"type", "function"},
                 {"function", {{"name", it["name"]}, {"arguments", it["arguments"]}}}});
        } else if (type == "function_call_output") {
            const std::string id = it.value("call_id", "");
            if (!call_ids.count(id))
                bad_request(
                    "'" + at + "': function_call_output for an unknown call_id '" + id + "'",
                    at + ".call_id");
            if (!it.contains("output"))
                bad_request("'" + at + ".output' is required", at + ".output");
            msgs.push_back({{"role", "tool"},
                            {"tool_call_id", id},
                            {"content", text_of(it["output"], at + ".output")}});
        } else if (type == "reasoning") {
            if (it.contains("content") && it["content"].is_array())
                reasoning += text_of(it["content"], at + ".content");
            else if (it.contains("summary") && it["summary"].is_array())
                reasoning += text_of(it["summary"], at + ".summary");
        } else {
            bad_request("'" + at + "': item type '" + type +
                            "' is not supported (message, function_call, function_call_output and "
                            "reasoning are; this server is stateless)",
                        at + ".type");
        }
    }
}

void text_format(const ojson& text, ojson& chat) {
    if (!text.is_object()) bad_request("'text' must be an object", "text");
    for (const auto& [k, v] : text.items()) {
        if (k == "verbosity" && v == "medium") continue;  // the neutral value
        if (k != "format") bad_request("'text." + k + "' is not supported", "text." + k);
    }
    if (!text.contains("format")) return;
    const ojson& f = text["format"];
    const std::string type = f.is_object() ? f.value("type", "") : "";
    if (type == "text") return;
    if (type == "json_object") {
        chat["response_format"] = {{"type", "json_object"}};
    } else if (type == "json_schema" && f.contains("schema")) {
        ojson js = {{"name", f.value("name", "response")}, {"schema", f["schema"]}};
        if (f.contains("strict")) js["strict"] = f["strict"];
        chat["response_format"] = {{"type", "json_schema"}, {"json_schema", js}};
    } else {
        bad_request("'text.format' must be text, json_object or json_schema with a schema",
                    "text.format");
    }
}

json usage_of(const Completion& c, int n_prompt) {
    return {{"input_tokens", n_prompt},
            {"input_tokens_details", {{"cached_tokens", c.n_cached}}},
            {"output_tokens", c.stats.n_generated},
            {"output_tokens_details", {{"reasoning_tokens", 0}}},
            {"total_tokens", n_prompt + c.stats.n_generated}};
}

json base_response(const std::string& id, const std::string& model, long created,
                   const char* status, const ResponsesRequest& req) {
    json r = {{"id", id},         {"object", "response"},    {"created_at", created},
              {"status", status}, {"error", nullptr},        {"incomplete_details", nullptr},
              {"model", model},   {"output", json::array()}, {"store", false},
              {"usage", nullptr}};
    for (const auto& [k, v] : req.echo.items()) r[k] = v;
    if (!req.dropped_tools.empty()) r["specula"] = {{"dropped_tools", req.dropped_tools}};
    return r;
}

// The fields this server refuses (unknown ones, and those that need a stored state).
void check_fields(const ojson& body) {
    if (!body.is_object()) bad_request("the request body must be a JSON object", "");
    static const std::set<std::string> known = {"model",
                                                "input",
                                                "instructions",
                                                "tools",
                                                "tool_choice",
                                                "stream",
                                                "max_output_tokens",
                                                "temperature",
                                                "top_p",
                                                "reasoning",
                                                "text",
                                                "store",
                                                "include",
                                                "user",
                                                "metadata",
                                                "truncation",
                                                "prompt_cache_key",
                                                "parallel_tool_calls",
                                                "client_metadata"};
    for (const auto& [k, v] : body.items()) {
        if ((k == "previous_response_id" || k == "conversation") && !v.is_null())
            bad_request("'" + k +
                            "': this server is stateless and keeps no responses; send the whole "
                            "conversation in 'input'",
                        k);
        if (!known.count(k) && !v.is_null())
            bad_request("'" + k + "' is not supported by this server", k);
    }
    if (body.contains("store") && body["store"] == true)
        bad_request(
            "'store': responses are never stored here (stateless); send store false or leave it "
            "out",
            "store");
    if (body.contains("truncation") && body["truncation"] != "disabled")
        bad_request("'truncation': only \"disabled\" (a request past the context is refused)",
                    "truncation");
    if (body.contains("include"))
        for (const ojson& v : body["include"])
            if (v != "reasoning.encrypted_content")
                bad_request("'include': " + v.dump() + " is not supported", "include");
}

// `tools` (function tools; others dropped or refused) and `tool_choice`, into the chat request
// and the echo.
void tools_to_chat(const ojson& body, bool drop_unsupported, ResponsesRequest& rr) {
    ojson& chat = rr.chat;
    ojson tools = ojson::array(), echo_tools = ojson::array();
    if (body.contains("tools")) {
        if (!body["tools"].is_array()) bad_request("'tools' must be an array", "tools");
        for (size_t i = 0; i < body["tools"].size(); ++i) {
            const ojson& t = body["tools"][i];
            const std::string type = t.is_object() ? t.value("type", "") : "";
            if (type != "function") {
                if (drop_unsupported) {
                    rr.dropped_tools.push_back(type);
                    continue;
                }
                bad_request(
                    "'tools[" + std::to_string(i) + "]': tool type '" + type +
                        "' is not available here (function tools are; --drop-unsupported-tools "
                        "drops the others)",
                    "tools");
            }
            if (!t.contains("name") || !t["name"].is_string())
                bad_request("'tools[" + std::to_string(i) + "].name' is required", "tools");
            ojson fn = {{"name", t["name"]}};
            for (const char* k : {"description", "parameters", "strict"})
                if (t.contains(k) && !t[k].is_null()) fn[k] = t[k];
            tools.push_back({{"type", "function"}, {"function", fn}});
            echo_tools.push_back(t);
        }
    }
    if (!tools.empty()) chat["tools"] = tools;
    rr.echo["tools"] = echo_tools;
    rr.echo["tool_choice"] = "auto";
    if (body.contains("tool_choice")) {
        const ojson& c = body["tool_choice"];
        if (c.is_string()) {
            chat["tool_choice"] = c;
        } else if (c.is_object() && c.value("type", "") == "function" && c.contains("name")) {
            chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", c["name"]}}}};
        } else {
            bad_request(
                "'tool_choice' must be auto, none, required or {\"type\": \"function\", "
                "\"name\": ...}",
                "tool_choice");
        }
        rr.echo["tool_choice"] = c;
    }
}

// `reasoning`: its effort as the template's enable_thinking.
void reasoning_to_chat(const ojson& body, ResponsesRequest& rr) {
    ojson& chat = rr.chat;
    const ojson& r = body["reasoning"];
    for (const auto& [k, v] : r.items())
        if (k != "effort" && k != "summary" && k != "generate_summary")
            bad_request("'reasoning." + k + "' is not supported", "reasoning." + k);
    if (r.contains("effort") && !r["effort"].is_null()) {
        const std::string e = r["effort"].get<std::string>();
        if (e != "none" && e != "minimal" && e != "low" && e != "medium" && e != "high" &&
            e != "xhigh")
            bad_request("'reasoning.effort' must be none, minimal, low, medium, high or xhigh",
                        "reasoning.effort");
        chat["chat_template_kwargs"] = {{"enable_thinking", e != "none" && e != "minimal"}};
    }
    rr.echo["reasoning"] = r;
}

}  // namespace

ResponsesRequest responses_to_chat(const ojson& body, bool drop_unsupported) {
    check_fields(body);
    ResponsesRequest rr;
    ojson& chat = rr.chat;
    if (body.contains("model")) chat["model"] = body["model"];
    ojson msgs = ojson::array();
    if (body.contains("instructions") && !body["instructions"].is_null()) {
        if (!body["instructions"].is_string())
            bad_request("'instructions' must be a string", "instructions");
        msgs.push_back({{"role", "system"}, {"content", body["instructions"]}});
        rr.echo["instructions"] = body["instructions"];
    }
    if (!body.contains("input")) bad_request("'input' is required", "input");
    const ojson& input = body["input"];
    if (input.is_string()) {
        msgs.push_back({{"role", "user"}, {"content", input}});
    } else if (input.is_array() && !input.empty()) {
        input_items(input, msgs);
    } else {
        bad_request("'input' must be a string or a non-empty array of items", "input");
    }
    chat["messages"] = msgs;
    tools_to_chat(body, drop_unsupported, rr);
    rr.echo["parallel_tool_calls"] = body.value("parallel_tool_calls", true);
    if (body.contains("parallel_tool_calls"))
        chat["parallel_tool_calls"] = body["parallel_tool_calls"];
    if (body.contains("max_output_tokens") && !body["max_output_tokens"].is_null()) {
        chat["max_tokens"] = body["max_output_tokens"];
        rr.echo["max_output_tokens"] = body["max_output_tokens"];
    }
    for (const char* k : {"temperature", "top_p"})
        if (body.contains(k) && !body[k].is_null()) {
            chat[k] = body[k];
            rr.echo[k] = body[k];
        }
    if (body.contains("reasoning") && body["reasoning"].is_object()) reasoning_to_chat(body, rr);
    if (body.contains("text")) {
        text_format(body["text"], chat);
        rr.echo["text"] = body["text"];
    }
    if (body.contains("metadata")) rr.echo["metadata"] = body["metadata"];
    if (body.contains("stream")) chat["stream"] = body["stream"];
    return rr;
}

json chat_to_response(const json& r, const Completion& c, const ResponsesRequest& req) {
    const json& choice = r["choices"][0];
    const json& m = choice["message"];
    const std::string id = "resp_" + r["id"].get<std::string>();
    json out = json::array();
    if (m.contains("reasoning_content") && m["reasoning_content"].is_string() &&
        !m["reasoning_content"].get<std::string>().empty())
        out.push_back(
            {{"type", "reasoning"},
             {"id", "rs_" + r["id"].get<std::string>()},
             {"summary", json::array()},
             {"content", {{{"type", "reasoning_text"}, {"text", m["reasoning_content"]}}}}});
    if (m["content"].is_string() && !m["content"].get<std::string>().empty())
        out.push_back({{"type", "message"},
                       {"id", "msg_" + r["id"].get<std::string>()},
                       {"status", "completed"},
                       {"role", "assistant"},
                       {"content",
                        {{{"type", "output_text"},
                          {"text", m["content"]},
                          {"annotations", json::array()},
                          {"logprobs", json::array()}}}}});
    if (m.contains("tool_calls"))
        for (const json& tc : m["tool_calls"])
            out.push_back({{"type", "function_call"},
                           {"id", "fc_" + tc["id"].get<std::string>()},
                           {"call_id", tc["id"]},
                           {"name", tc["function"]["name"]},
                           {"arguments", tc["function"]["arguments"]},
                           {"status", "completed"}});
    const bool cut = choice["finish_reason"] == "length";
    json resp = base_response(id, r["model"], r["created"].get<long>(),
                              cut ? "incomplete" : "completed", req);
    resp["output"] = out;
    if (cut) resp["incomplete_details"] = {{"reason", "max_output_tokens"}};
    resp["usage"] = usage_of(c, r["usage"]["prompt_tokens"].get<int>());
    return resp;
}

ResponseEventStream::ResponseEventStream(std::string id, std::string model, long created,
                                         const ResponsesRequest& req)
    : id_("resp_" + std::move(id)), model_(std::move(model)), created_(created), req_(req) {}

json ResponseEventStream::base(const char* status) const {
    return base_response(id_, model_, created_, status, req_);
}

std::string ResponseEventStream::event(const char* type, json body) {
    body["type"] = type;
    body["sequence_number"] = seq_++;
    // Model output may hold invalid UTF-8: replaced (U+FFFD), never thrown.
    return std::string("event: ") + type +
           "\ndata: " + body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

std::string ResponseEventStream::start() {
    return event("response.created", {{"response", base("in_progress")}}) +
           event("response.in_progress", {{"response", base("in_progress")}});
}

std::string ResponseEventStream::open(json item) {
    std::string out = close();
    const int index = int(output_.size());
    const std::string type = item["type"];
    item["id"] = (type == "message"     ? "msg_"
                  : type == "reasoning" ? "rs_"
                                        : "fc_") +
                 id_ + "_" + std::to_string(index);
    output_.push_back(item);
    open_ = true;
    text_.clear();
    out += event("response.output_item.added", {{"output_index", index}, {"item", item}});
    if (type == "message" || type == "reasoning") {
        const json part =
            type == "message"
                ? json{{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}
                : json{{"type", "reasoning_text"}, {"text", ""}};
        out += event("response.content_part.added", {{"item_id", item["id"]},
                                                     {"output_index", index},
                                                     {"content_index", 0},
                                                     {"part", part}});
    }
    return out;
}

std::string ResponseEventStream::close() {
    if (!open_) return "";
    open_ = false;
    const int index = int(output_.size()) - 1;
    json& item = output_.back();
    const std::string type = item["type"];
    const json where = {{"item_id", item["id"]}, {"output_index", index}};
    std::string out;
    if (type == "function_call") {
        item["arguments"] = text_;
        item["status"] = "completed";
        json done = where;
        done["arguments"] = text_;
        out += event("response.function_call_arguments.done", done);
    } else {
        const bool msg = type == "message";
        json part = msg ? json{{"type", "output_text"},
                               {"text", text_},
                               {"annotations", json::array()},
                               {"logprobs", json::array()}}
                        : json{{"type", "reasoning_text"}, {"text", text_}};
        json done = where;
        done["content_index"] = 0;
        done["text"] = text_;
        if (msg) done["logprobs"] = json::array();
        out += event(msg ? "response.output_text.done" : "response.reasoning_text.done", done);
        json pd = where;
        pd["content_index"] = 0;
        pd["part"] = part;
        out += event("response.content_part.done", pd);
        item["content"] = json::array({part});
        if (msg) item["status"] = "completed";
    }
    out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
    return out;
}

std::string ResponseEventStream::chunk(const json& chunk) {
    if (!chunk.contains("choices") || chunk["choices"].empty()) return "";
    const json& choice = chunk["choices"][0];
    if (!choice.contains("delta")) return "";
    const json& d = choice["delta"];
    std::string out;
    const auto kind = [&]() -> std::string {
        return open_ ? output_.back()["type"].get<std::string>() : std::string();
    };
    const auto delta = [&](const char* type, const std::string& text, bool content_index) {
        text_ += text;
        json body = {{"item_id", output_.back()["id"]},
                     {"output_index", int(output_.size()) - 1},
                     {"delta", text}};
        if (content_index) body["content_index"] = 0;
        if (std::string(type) == "response.output_text.delta") body["logprobs"] = json::array();
        out += event(type, body);
    };
    if (d.contains("reasoning_content") && d["reasoning_content"].is_string() &&
        !d["reasoning_content"].get<std::string>().empty()) {
        if (kind() != "reasoning")
            out += open(
                {{"type", "reasoning"}, {"summary", json::array()}, {"content", json::array()}});
        delta("response.reasoning_text.delta", d["reasoning_content"], true);
    }
    if (d.contains("content") && d["content"].is_string() &&
        !d["content"].get<std::string>().empty()) {
        if (kind() != "message")
            out += open({{"type", "message"},
                         {"status", "in_progress"},
                         {"role", "assistant"},
                         {"content", json::array()}});
        delta("response.output_text.delta", d["content"], true);
    }
    if (d.contains("tool_calls"))
        for (const json& tc : d["tool_calls"]) {
            if (tc.contains("id"))
                out += open({{"type", "function_call"},
                             {"call_id", tc["id"]},
                             {"name", tc["function"]["name"]},
                             {"arguments", ""},
                             {"status", "in_progress"}});
            const std::string args = tc.contains("function") && tc["function"].contains("arguments")
                                         ? tc["function"]["arguments"].get<std::string>()
                                         : std::string();
            if (!args.empty() && kind() == "function_call")
                delta("response.function_call_arguments.delta", args, false);
        }
    return out;
}

std::string ResponseEventStream::finish(const Completion& c, int n_prompt) {
    std::string out = close();
    const bool cut = c.finish_reason == "length";
    json resp = base(cut ? "incomplete" : "completed");
    resp["output"] = output_;
    if (cut) resp["incomplete_details"] = {{"reason", "max_output_tokens"}};
    resp["usage"] = usage_of(c, n_prompt);
    return out + event(cut ? "response.incomplete" : "response.completed", {{"response", resp}});
}

}  // namespace specula
