// Chat prompts: see chat_prompt.h.
#include "chat/chat_prompt.h"

#include <fstream>
#include <sstream>

#include "chat/tool_calls.h"
#include "common/error.h"

namespace specula {

ChatPrompter ChatPrompter::jinja(const std::string& source, const std::string& origin,
                                 ChatTokens tokens) {
    ChatPrompter p;
    try {
        p.tmpl_ = std::make_shared<const ChatTemplate>(source);
    } catch (const Error& e) {
        fail("the chat template (", origin, ") does not parse: ", e.what());
    }
    p.origin_ = origin;
    p.tokens_ = std::move(tokens);
    p.thinks_ = source.find("<think>") != std::string::npos;
    p.thinking_switch_ = source.find("enable_thinking") != std::string::npos;
    p.effort_variable_ = source.find("reasoning_effort") != std::string::npos;
    p.tool_format_ = detect_tool_call_format(source);
    return p;
}

ChatPrompter ChatPrompter::builtin(ChatFormat format, const std::string& origin) {
    ChatPrompter p;
    p.format_ = format;
    p.origin_ = origin;
    return p;
}

std::string ChatPrompter::describe() const {
    return std::string(is_jinja() ? "jinja" : chat_format_name(format_)) + " (" + origin_ + ")";
}

std::string ChatPrompter::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& tools,
                                 const nlohmann::ordered_json& kwargs) const {
    if (!messages.is_array()) fail("chat template: messages must be an array");
    if (!kwargs.is_null() && !kwargs.is_object()) fail("chat_template_kwargs must be an object");
    if (!is_jinja()) {
        if (!tools.is_null())
            fail("tools need a Jinja chat template; the built-in ", chat_format_name(format_),
                 " format has none");
        std::vector<ChatMessage> list;
        for (const auto& m : messages) {
            const std::string role = m.value("role", "");
            if ((role != "system" && role != "user" && role != "assistant") ||
                m.contains("tool_calls"))
                fail("tool messages and tool calls need a Jinja chat template; the built-in ",
                     chat_format_name(format_), " format has none");
            const auto c = m.find("content");
            list.push_back(
                {m.value("role", ""), c != m.end() && c->is_string() ? c->get<std::string>() : ""});
        }
        return render_chat(format_, list, add_generation_prompt);
    }
    nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
    ctx["messages"] = messages;
    if (!tools.is_null()) ctx["tools"] = tools;
    ctx["add_generation_prompt"] = add_generation_prompt;
    ctx["bos_token"] = tokens_.bos;
    ctx["eos_token"] = tokens_.eos;
    if (kwargs.is_object())
        for (auto it = kwargs.begin(); it != kwargs.end(); ++it) ctx[it.key()] = it.value();
    std::string text;
    try {
        text = tmpl_->render(ctx);
    } catch (const Error& e) {
        // Many templates (Qwen3's among them) test `'</think>' in message.content`, which fails
        // on the null content of an assistant message that only calls tools, as OpenAI's SDKs
        // send it back. Such a template gets "" for null content, as llama.cpp gives it.
        bool had_null = false;
        for (auto& m : ctx["messages"]) {
            if (!m.is_object()) continue;
            if (auto c = m.find("content"); c != m.end() && c->is_null()) {
                *c = "";
                had_null = true;
            }
        }
        try {
            if (!had_null) throw;
            text = tmpl_->render(ctx);
        } catch (const Error&) {
            fail("the chat template (", origin_, ") failed: ", e.what());
        }
    }
    if (tokens_.strip_bos && !tokens_.bos.empty() && text.starts_with(tokens_.bos))
        text.erase(0, tokens_.bos.size());
    return text;
}

GuardedText ChatPrompter::render_guarded(const nlohmann::ordered_json& messages,
                                         bool add_generation_prompt,
                                         const nlohmann::ordered_json& tools,
                                         const nlohmann::ordered_json& kwargs) const {
    if (!guard_ || guard_->empty())
        return {render(messages, add_generation_prompt, tools, kwargs), {}};
    nlohmann::ordered_json m = messages, t = tools, k = kwargs;
    guard_->guard(m);
    guard_->guard(t);
    guard_->guard(k);
    // A leading BOS text is dropped before restoring: a client's BOS text stays.
    return guard_->restore(render(m, add_generation_prompt, t, k));
}

ChatPrompter load_chat_template_file(const std::string& path, ChatTokens tokens) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("--chat-template-file: cannot read '", path, "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) fail("--chat-template-file: error reading '", path, "'");
    const std::string source = ss.str();
    if (source.empty()) fail("--chat-template-file: '", path, "' is empty");
    return ChatPrompter::jinja(source, "--chat-template-file " + path, std::move(tokens));
}

}  // namespace specula
