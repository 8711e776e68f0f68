// Fuzzes the chat templates. The input up to the first NUL is a template string, the rest is
// messages separated by NUL, the first byte of each picking the role. The hand-written renderers
// (chat_template.h: the format detected from the template's markers, then every format) render
// every message list without crashing; the Jinja engine (jinja_template.h) parses the template
// and, when it parses, renders it over the messages under small budgets, so a hostile template
// (deep nesting, runaway loops or recursion, huge strings) ends in an Error, never a crash or hang.
// fuzz/seeds/chat_template holds such templates (scripts/fuzz.sh seeds the corpus with them).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "chat/jinja_template.h"
#include "common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string in(reinterpret_cast<const char*>(data), size);
    const size_t nul = in.find('\0');
    const std::string tmpl = in.substr(0, nul);
    std::vector<specula::ChatMessage> msgs;
    static const char* roles[] = {"system", "user", "assistant"};
    for (size_t p = nul == std::string::npos ? in.size() : nul + 1; p < in.size();) {
        size_t e = in.find('\0', p);
        if (e == std::string::npos) e = in.size();
        const std::string m = in.substr(p, e - p);
        if (!m.empty()) msgs.push_back({roles[uint8_t(m[0]) % 3], m.substr(1)});
        p = e + 1;
    }
    const specula::ChatFormat detected = specula::detect_chat_format(tmpl);
    (void)specula::render_chat(detected, msgs, true);
    for (int f = 0; f <= int(specula::ChatFormat::Phi3); ++f)
        (void)specula::render_chat(specula::ChatFormat(f), msgs, f & 1);

    specula::jinja::Limits limits;
    limits.max_steps = 200000;
    limits.max_output = 1 << 20;
    limits.max_items = 100000;
    limits.max_calls = 50;
    limits.max_depth = 400;
    limits.max_iterations = 20000;
    limits.max_bytes = 64u << 20;
    nlohmann::ordered_json context = {
        {"bos_token", "<s>"}, {"eos_token", "</s>"}, {"add_generation_prompt", true}};
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    for (const auto& m : msgs)
        messages.push_back(
            {{"role", m.role}, {"content", nlohmann::ordered_json::string_t(m.content)}});
    context["messages"] = messages;
    context["tools"] = nlohmann::ordered_json::parse(
        R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}}])");
    try {
        const specula::ChatTemplate t(tmpl, limits);
        (void)t.render(context);
    } catch (const specula::Error&) {
        // a syntax error, a template error or a budget: all expected
    }
    return 0;
}
