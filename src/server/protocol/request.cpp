// Request parsing: see request.h.
#include "server/protocol/request.h"

#include <algorithm>

#include "common/error.h"
#include "server/protocol/api_error.h"
#include "server/protocol/request_fields.h"
#include "server/protocol/request_tools.h"

namespace specula {

namespace {

using json = nlohmann::json;

const json* field(const json& body, const char* name) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
}

[[noreturn]] void wrong_type(const std::string& name, const char* expected) {
    bad_request("'" + name + "' must be " + expected, name);
}

double get_number(const json& body, const char* name, double def, double lo, double hi) {
    const json* v = field(body, name);
    if (!v) return def;
    if (!v->is_number()) wrong_type(name, "a number");
    const double x = v->get<double>();
    if (!(x >= lo && x <= hi)) {
        bad_request("'" + std::string(name) + "' must be in [" + json(lo).dump() + ", " +
                        json(hi).dump() + "], got " + v->dump(),
                    name);
    }
    return x;
}

int64_t get_int(const json& body, const char* name, int64_t def, int64_t lo, int64_t hi) {
    const json* v = field(body, name);
    if (!v) return def;
    if (!v->is_number_integer()) wrong_type(name, "an integer");
    const int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX)
                          ? INT64_MAX
                          : v->get<int64_t>();
    if (x < lo || x > hi) {
        bad_request("'" + std::string(name) + "' must be in [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "], got " + v->dump(),
                    name);
    }
    return x;
}

bool get_bool(const json& body, const char* name, bool def) {
    const json* v = field(body, name);
    if (!v) return def;
    if (!v->is_boolean()) wrong_type(name, "a boolean");
    return v->get<bool>();
}

std::vector<std::string> get_stop(const json& body) {
    const json* v = field(body, "stop");
    if (!v) return {};
    if (v->is_string())
        return v->get<std::string>().empty() ? std::vector<std::string>{}
                                             : std::vector<std::string>{*v};
    if (!v->is_array()) wrong_type("stop", "a string or an array of strings");
    if (v->size() > 16) bad_request("'stop' holds at most 16 strings", "stop");
    std::vector<std::string> out;
    for (const auto& s : *v) {
        if (!s.is_string()) wrong_type("stop", "a string or an array of strings");
        if (!s.get<std::string>().empty()) out.push_back(s.get<std::string>());
    }
    return out;
}

// The text of one message's content: a string, or an array of {"type": "text", "text": ...}.
std::string message_content(const json& m, size_t i) {
    const std::string param = "messages[" + std::to_string(i) + "].content";
    const json* c = field(m, "content");
    if (!c) return "";
    if (c->is_string()) return c->get<std::string>();
    if (!c->is_array()) wrong_type(param, "a string or an array of text parts");
    std::string text;
    for (const auto& part : *c) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string()) {
            bad_request("'" + param + "' parts must be {\"type\": \"text\", \"text\": ...}", param);
        }
        text += part["text"].get<std::string>();
    }
    return text;
}

std::vector<ChatMessage> get_messages(const json& body) {
    const json* v = field(body, "messages");
    if (!v) bad_request("'messages' is required", "messages");
    if (!v->is_array()) wrong_type("messages", "an array of messages");
    if (v->empty()) bad_request("'messages' must not be empty", "messages");
    std::vector<ChatMessage> out;
    for (size_t i = 0; i < v->size(); ++i) {
        const json& m = (*v)[i];
        const std::string param = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) wrong_type(param, "an object");
        const json* role = field(m, "role");
        if (!role || !role->is_string()) wrong_type(param + ".role", "a string");
        const std::string r = role->get<std::string>();
        if (r != "system" && r != "user" && r != "assistant" && r != "developer" && r != "tool") {
            bad_request(
                "'" + param + ".role' must be system, user, assistant or tool, got '" + r + "'",
                param + ".role");
        }
        out.push_back({r == "developer" ? "system" : r, message_content(m, i)});
    }
    return out;
}

// chat_template_kwargs: an object of extra template variables (e.g. enable_thinking); it may
// not replace the conversation itself.
nlohmann::ordered_json get_template_kwargs(const json& body) {
    const json* v = field(body, "chat_template_kwargs");
    if (!v) return nullptr;
    if (!v->is_object()) wrong_type("chat_template_kwargs", "an object");
    for (const char* reserved : {"messages", "tools"})
        if (v->contains(reserved))
            bad_request(std::string("'chat_template_kwargs.") + reserved +
                            "' is not allowed (give it as the request's own field)",
                        std::string("chat_template_kwargs.") + reserved);
    return nlohmann::ordered_json::parse(v->dump());
}

std::string get_reasoning_format(const json& body) {
    const json* v = field(body, "reasoning_format");
    if (!v) return "";
    if (!v->is_string() || (*v != "none" && *v != "deepseek" && *v != "auto"))
        bad_request(
            "'reasoning_format' must be \"none\", \"deepseek\" or \"auto\", got " + v->dump(),
            "reasoning_format");
    return v->get<std::string>();
}

void get_prompt(const json& body, CompletionRequest& r) {
    const json* v = field(body, "prompt");
    if (!v) bad_request("'prompt' is required", "prompt");
    if (v->is_string()) {
        r.prompt = v->get<std::string>();
        return;
    }
    if (!v->is_array()) wrong_type("prompt", "a string, an array of one string or token ids");
    if (v->size() == 1 && (*v)[0].is_string()) {
        r.prompt = (*v)[0].get<std::string>();
        return;
    }
    for (const auto& t : *v) {
        if (!t.is_number_integer()) {
            bad_request(
                "'prompt' must be a string, an array of one string or token ids "
                "(several prompts per request are not supported)",
                "prompt");
        }
        // Range-checked here, not narrowed: [1, 4294967301] must not run as token 5. The
        // vocabulary bound is checked against the model later.
        if (t.is_number_unsigned() ? t.get<uint64_t>() > uint64_t(INT32_MAX)
                                   : (t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX)) {
            bad_request("prompt token id " + t.dump() + " is not a valid token id", "prompt");
        }
        r.prompt_ids.push_back(int32_t(t.get<int64_t>()));
    }
    if (r.prompt_ids.empty()) bad_request("'prompt' must not be an empty array", "prompt");
}

std::optional<int> get_draft_override(const json& body) {
    const json* v = field(body, "speculative");
    if (!v) return std::nullopt;
    if (!v->is_object()) wrong_type("speculative", "an object");
    const json* n = field(*v, "num_speculative_tokens");
    if (!n) return std::nullopt;
    if (!n->is_number_integer() || n->get<int64_t>() < 0 || n->get<int64_t>() > 64) {
        bad_request("'speculative.num_speculative_tokens' must be an integer in [0, 64]",
                    "speculative.num_speculative_tokens");
    }
    return n->get<int>();
}

// "speculative": {"trace": bool}: each choice gets its draft trace (speculative/draft_trace.h).
bool get_trace(const json& body) {
    const json* v = field(body, "speculative");
    if (!v || !v->is_object()) return false;  // get_draft_override refuses a non-object
    const json* t = field(*v, "trace");
    if (!t) return false;
    if (!t->is_boolean()) wrong_type("speculative.trace", "a boolean");
    return t->get<bool>();
}

// stream_options: {"include_usage": bool}; only with stream: true (as OpenAI requires).
bool get_include_usage(const json& body, bool stream) {
    const json* v = field(body, "stream_options");
    if (!v) return false;
    if (!stream)
        bad_request("'stream_options' is only allowed with stream: true", "stream_options");
    if (!v->is_object()) wrong_type("stream_options", "an object");
    for (const auto& [k, x] : v->items()) {
        if (k != "include_usage" && !x.is_null())
            bad_request("'stream_options." + k + "' is not supported (only include_usage)",
                        "stream_options." + k);
    }
    const json* u = field(*v, "include_usage");
    if (!u) return false;
    if (!u->is_boolean()) wrong_type("stream_options.include_usage", "a boolean");
    return u->get<bool>();
}

// vLLM's prompt_logprobs: null or false (-1), N in 0..20, or true (1, as vLLM reads it);
// refused with stream, as vLLM does.
int get_prompt_logprobs(const json& body, bool stream) {
    const json* v = field(body, "prompt_logprobs");
    if (!v) return -1;
    const int n = v->is_boolean() ? (v->get<bool>() ? 1 : -1)
                                  : int(get_int(body, "prompt_logprobs", -1, 0, 20));
    if (stream)
        bad_request("'prompt_logprobs' is not available with stream: true (as in vLLM)",
                    "prompt_logprobs");
    return n;
}

// chat: logprobs (bool) + top_logprobs (0..20, only with logprobs); completions: logprobs N.
// llama-server's n_probs N > 0 asks for the same (N alternatives) when logprobs is not given.
int get_logprobs(const json& body, bool chat) {
    const int n_probs = int(get_int(body, "n_probs", 0, 0, 20));
    if (n_probs > 0 && !field(body, "logprobs")) return n_probs;
    if (!chat) return int(get_int(body, "logprobs", -1, 0, 20));
    const bool on = get_bool(body, "logprobs", false);
    if (field(body, "top_logprobs") && !on)
        bad_request("'top_logprobs' needs logprobs: true", "top_logprobs");
    const int top = int(get_int(body, "top_logprobs", 0, 0, 20));
    return on ? top : -1;
}

// Whether llama-server's `samplers` lists a sampler (by `name`, or `letter` in its one-letter
// string).
bool lists(const json& samplers, const char* name, char letter) {
    if (samplers.is_string()) return samplers.get<std::string>().find(letter) != std::string::npos;
    for (const json& s : samplers)
        if (s == name || s == std::string(1, letter)) return true;
    return false;
}

// llama-server's dry_* fields (sampling/dry.h). dry_base < 1 is refused only with DRY on
// (llama.cpp then resets it to its default); samplers that leave dry out while it is on would
// have llama.cpp skip it, so that is refused rather than guessed.
DryParams get_dry(const json& body, const DryParams& d) {
    DryParams p = d;
    p.multiplier = float(get_number(body, "dry_multiplier", d.multiplier, 0.0, 1e6));
    p.base = float(get_number(body, "dry_base", d.base, -1e6, 1e6));
    p.allowed_length = int(get_int(body, "dry_allowed_length", d.allowed_length, 0, INT32_MAX));
    p.penalty_last_n = int(get_int(body, "dry_penalty_last_n", d.penalty_last_n, -1, INT32_MAX));
    if (const json* b = field(body, "dry_sequence_breakers")) {
        constexpr size_t kMax = 64;
        if (!b->is_array() || b->empty() || b->size() > kMax)
            wrong_type("dry_sequence_breakers", "a non-empty array of at most 64 strings");
        p.sequence_breakers.clear();
        for (const json& s : *b) {
            if (!s.is_string() || s.get_ref<const std::string&>().empty())
                bad_request("'dry_sequence_breakers' holds non-empty strings, got " + s.dump(),
                            "dry_sequence_breakers");
            p.sequence_breakers.push_back(s.get<std::string>());
        }
    }
    if (p.on() && p.base < 1.f)
        bad_request(
            "'dry_base' must be >= 1 when dry_multiplier is not 0, got " + std::to_string(p.base),
            "dry_base");
    if (const json* s = field(body, "samplers"); s && p.on() && !lists(*s, "dry", 'd'))
        bad_request("'samplers' leaves out dry while dry_multiplier is " +
                        std::to_string(p.multiplier) + ": list dry (d) first, or set it to 0",
                    "samplers");
    return p;
}

PenaltyParams get_penalties(const json& body, const RequestDefaults& d) {
    PenaltyParams p;
    p.presence_penalty = float(get_number(body, "presence_penalty", d.presence_penalty, -2.0, 2.0));
    p.frequency_penalty =
        float(get_number(body, "frequency_penalty", d.frequency_penalty, -2.0, 2.0));
    const char* rep = field(body, "repeat_penalty") ? "repeat_penalty" : "repetition_penalty";
    p.repeat_penalty = float(get_number(body, rep, d.repeat_penalty, 1e-3, 100.0));
    // OpenAI's penalties count the whole output; llama.cpp's window is the last 64 tokens (or
    // the server's --repeat-last-n).
    const bool openai_only = !field(body, rep) && d.repeat_penalty == 1.0f;
    const int window = d.repeat_last_n != RequestDefaults::kRepeatLastNUnset ? d.repeat_last_n
                       : openai_only                                         ? -1
                                                                             : 64;
    p.repeat_last_n = int(get_int(body, "repeat_last_n", window, -1, INT32_MAX));
    p.dry = get_dry(body, d.dry);
    return p;
}

std::shared_ptr<const JsonGrammar> get_grammar(const json& body) {
    const json* v = field(body, "response_format");
    // llama-server's json_schema and vLLM's guided_json: a JSON schema, as response_format's.
    for (const char* name : {"json_schema", "guided_json"}) {
        const json* schema = field(body, name);
        if (!schema) continue;
        if (v) bad_request("give either response_format or " + std::string(name), name);
        json s = *schema;
        if (s.is_string()) {  // vLLM takes the schema as a JSON string too
            s = json::parse(s.get<std::string>(), nullptr, false);
            if (s.is_discarded())
                bad_request("'" + std::string(name) + "' is not valid JSON", name);
        }
        if (!s.is_object()) wrong_type(name, "a JSON schema object");
        try {
            return response_format_grammar(
                {{"type", "json_schema"}, {"json_schema", {{"name", name}, {"schema", s}}}});
        } catch (const Error& e) {
            bad_request(std::string(name) + ": " + e.what(), name);
        } catch (const nlohmann::json::exception& e) {
            bad_request(std::string(name) + ": " + e.what(), name);
        }
    }
    if (!v) return nullptr;
    try {
        return response_format_grammar(*v);
    } catch (const Error& e) {
        std::string param = "response_format";
        const std::string msg = e.what();
        for (const char* sub : {"response_format.json_schema", "response_format.type"})
            if (msg.find(sub) != std::string::npos) param = sub;
        bad_request(msg, param);
    } catch (const nlohmann::json::exception& e) {  // a schema value of an unexpected type
        bad_request(std::string("response_format: ") + e.what(), "response_format");
    }
}

// `seed`: a negative integer picks a random seed; 0 .. 2^64 - 1 is used as is (not clamped).
uint64_t get_seed(const json& body, uint64_t def) {
    const json* v = field(body, "seed");
    if (!v) return def;
    if (!v->is_number_integer()) wrong_type("seed", "an integer");
    if (v->is_number_unsigned()) return v->get<uint64_t>();
    const int64_t x = v->get<int64_t>();
    return x < 0 ? 0xFFFFFFFFu : uint64_t(x);
}

}  // namespace

CompletionRequest parse_completion_request(const json& body, bool chat,
                                           const nlohmann::ordered_json* raw,
                                           const RequestDefaults& d) {
    if (!body.is_object()) bad_request("the request body must be a JSON object");
    CompletionRequest r;
    r.chat = chat;
    if (const json* m = field(body, "model")) {
        if (!m->is_string()) wrong_type("model", "a string");
        r.model = m->get<std::string>();
    }
    if (chat) {
        r.messages = get_messages(body);
    } else {
        get_prompt(body, r);
    }
    check_request_fields(body, chat);  // after the required field, which is the likelier mistake
    r.n = int(get_int(body, "n", 1, 1, 16));
    if (!chat && get_int(body, "best_of", r.n, 1, 16) != r.n)
        bad_request("'best_of' must equal n (no server-side ranking of choices)", "best_of");
    if (const json* u = field(body, "user"); u && !u->is_string()) wrong_type("user", "a string");
    const char* max_name = field(body, "max_completion_tokens") ? "max_completion_tokens"
                           : field(body, "max_tokens")          ? "max_tokens"
                                                                : "n_predict";
    r.max_tokens = get_int(body, max_name, d.max_tokens, -1, INT32_MAX);
    r.temperature = float(get_number(body, "temperature", d.temperature, 0.0, 2.0));
    r.top_p = float(get_number(body, "top_p", d.top_p, 0.0, 1.0));
    r.min_p = float(get_number(body, "min_p", d.min_p, 0.0, 1.0));
    r.typical_p = float(get_number(body, "typical_p", d.typical_p, 0.0, 1.0));
    r.top_n_sigma = float(get_number(body, "top_n_sigma", d.top_n_sigma, -1e9, 1e9));
    r.xtc_probability = float(get_number(body, "xtc_probability", d.xtc_probability, 0.0, 1.0));
    r.xtc_threshold = float(get_number(body, "xtc_threshold", d.xtc_threshold, 0.0, 1.0));
    if (const json* s = field(body, "samplers");
        s && r.xtc_probability > 0 && r.xtc_threshold <= 0.5f && !lists(*s, "xtc", 'x'))
        bad_request("'samplers' leaves out xtc while xtc_probability is " +
                        std::to_string(r.xtc_probability) +
                        ": list xtc (x) after min_p, or set it to 0",
                    "samplers");
    r.top_k = int(get_int(body, "top_k", d.top_k, -1, INT32_MAX));
    r.seed = get_seed(body, d.seed);
    r.stop = get_stop(body);
    r.include_stop_str = get_bool(body, "include_stop_str_in_output", false);
    if (const json* ids = field(body, "stop_token_ids")) {
        if (!ids->is_array() || ids->size() > 64)
            wrong_type("stop_token_ids", "an array of token ids");
        for (const json& t : *ids) {
            if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX)
                bad_request("'stop_token_ids' holds token ids, got " + t.dump(), "stop_token_ids");
            r.stop_token_ids.push_back(int32_t(t.get<int64_t>()));
        }
    }
    r.stream = get_bool(body, "stream", false);
    r.include_usage = get_include_usage(body, r.stream);
    r.ignore_eos = get_bool(body, "ignore_eos", false);
    r.timings_per_token = get_bool(body, "timings_per_token", false);
    r.n_draft = get_draft_override(body);
    r.trace = get_trace(body);
    r.echo = !chat && get_bool(body, "echo", false);
    r.logprobs = get_logprobs(body, chat);
    r.prompt_logprobs = get_prompt_logprobs(body, r.stream);
    r.penalties = get_penalties(body, d);
    if (const json* b = field(body, "logit_bias")) {
        if (!b->is_object() && !b->is_array())
            wrong_type("logit_bias", "an object of token id -> bias (or [[id, bias], ...])");
        r.logit_bias_json = *b;
    }
    r.grammar = get_grammar(body);
    if (chat) {
        // The template sees messages and tools with their keys in the order sent.
        nlohmann::ordered_json reparsed;  // only without the caller's ordered parse
        if (!raw) reparsed = nlohmann::ordered_json::parse(body.dump());
        const nlohmann::ordered_json& ordered = raw ? *raw : reparsed;
        std::vector<std::string> texts;
        for (const ChatMessage& m : r.messages) texts.push_back(m.content);
        r.chat_messages = template_messages(ordered["messages"], texts);
        const ToolFields tf = get_tool_fields(ordered);
        r.tools = tf.tools;
        r.parallel_tool_calls = tf.parallel_tool_calls;
        r.tool_forced = tf.forced;
        r.tool_forced_name = tf.forced_name;
        r.chat_template_kwargs = get_template_kwargs(body);
        if (const json* e = field(body, "reasoning_effort"); e && !e->is_null()) {
            static const char* kEfforts[] = {"none", "minimal", "low", "medium", "high", "xhigh"};
            const bool known =
                e->is_string() && std::find(std::begin(kEfforts), std::end(kEfforts),
                                            e->get<std::string>()) != std::end(kEfforts);
            if (!known)
                bad_request("'reasoning_effort' must be none, minimal, low, medium, high or xhigh",
                            "reasoning_effort");
            r.reasoning_effort = e->get<std::string>();
        }
        r.reasoning_format = get_reasoning_format(body);
        r.continue_final_message = get_bool(body, "continue_final_message", false);
        r.add_generation_prompt =
            get_bool(body, "add_generation_prompt", !r.continue_final_message);
        if (r.continue_final_message && r.add_generation_prompt)
            bad_request("continue_final_message needs add_generation_prompt: false",
                        "continue_final_message");
        if (r.continue_final_message && r.messages.back().role != "assistant")
            bad_request("continue_final_message needs the last message to be the assistant's",
                        "continue_final_message");
    }
    return r;
}

}  // namespace specula
