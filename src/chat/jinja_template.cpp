#include "chat/jinja_template.h"

#include "chat/jinja/parser.h"
#include "common/error.h"

namespace specula {

namespace {

thread_local const std::function<bool()>* t_cancelled = nullptr;  // the innermost scope's

template <class J>
std::string render_with(const jinja::Program& program, const jinja::Limits& limits,
                        const J& context) {
    if (!context.is_object() && !context.is_null())
        fail("chat template: the context must be a JSON object");
    try {
        std::vector<std::pair<std::string, jinja::Value>> vars;
        if (context.is_object())
            for (auto it = context.begin(); it != context.end(); ++it)
                vars.emplace_back(it.key(), jinja::from_json(it.value()));
        jinja::Interpreter in(program, limits, t_cancelled ? *t_cancelled : nullptr);
        return in.render(vars);
    } catch (const jinja::TemplateRaised& e) {
        throw Error("chat template raised: " + e.message);
    } catch (const Error&) {
        throw;
    } catch (const std::bad_alloc&) {
        throw Error("chat template: out of memory");
    } catch (const std::exception& e) {
        throw Error(std::string("chat template: ") + e.what());
    }
}

}  // namespace

RenderCancelScope::RenderCancelScope(std::function<bool()> cancelled)
    : cancelled_(std::move(cancelled)), outer_(t_cancelled) {
    t_cancelled = &cancelled_;
}

RenderCancelScope::~RenderCancelScope() {
    t_cancelled = outer_;
}

ChatTemplate::ChatTemplate(const std::string& source, jinja::Limits limits)
    : program_(jinja::parse(source)), limits_(limits) {}

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
    return render_with(*program_, limits_, context);
}

std::string ChatTemplate::render(const nlohmann::json& context) const {
    return render_with(*program_, limits_, context);
}

const std::string& ChatTemplate::source() const {
    return program_->source;
}

std::string render_chat_template(const std::string& tmpl, const nlohmann::ordered_json& context) {
    return ChatTemplate(tmpl).render(context);
}

std::string render_chat_template(const std::string& tmpl, const nlohmann::json& context) {
    return ChatTemplate(tmpl).render(context);
}

}  // namespace specula
