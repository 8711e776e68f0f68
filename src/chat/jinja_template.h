// Chat templates rendered by the project's own Jinja engine (src/chat/jinja/), byte for byte as
// @huggingface/jinja (the engine transformers.js uses) renders them: the GGUF's
// tokenizer.chat_template text, parsed once, rendered against a JSON context such as
//
//   {"messages": [...], "tools": [...], "add_generation_prompt": true, "bos_token": "<s>",
//    "eos_token": "</s>", "enable_thinking": false, ...any chat_template_kwargs}
//
// The context is given as is: nothing is added (no default bos_token or add_generation_prompt).
// Pass nlohmann::ordered_json to keep the key order of tool schemas (it shows in `tojson`); a
// plain nlohmann::json iterates its keys sorted.
//
// Every failure is a specula::Error with a one-line message: a syntax error names line and
// column, a run-time error (unknown filter, calling a non-function, ...) the line and column of
// the expression, and raise_exception(msg) gives "chat template raised: msg". Budgets (steps,
// loop iterations, nesting, string and list sizes, bytes allocated) bound the work and memory
// any template can cause, each failing with an Error naming the limit; see jinja::Limits and
// docs/chat-templates.md#limits.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/jinja/interpreter.h"

namespace specula {

class ChatTemplate {
  public:
    // Parses `source`; throws Error on a syntax error.
    explicit ChatTemplate(const std::string& source, jinja::Limits limits = {});

    std::string render(const nlohmann::ordered_json& context) const;
    std::string render(const nlohmann::json& context) const;

    const std::string& source() const;

  private:
    std::shared_ptr<const jinja::Program> program_;
    jinja::Limits limits_;
};

// While one lives, every render on its thread polls `cancelled` every few thousand steps and
// stops with an Error ("render cancelled") once it returns true: the server holds one while it
// prepares a request, polling whether the client is still connected. Scopes nest (the inner
// one counts).
class RenderCancelScope {
  public:
    explicit RenderCancelScope(std::function<bool()> cancelled);
    ~RenderCancelScope();
    RenderCancelScope(const RenderCancelScope&) = delete;
    RenderCancelScope& operator=(const RenderCancelScope&) = delete;

  private:
    std::function<bool()> cancelled_;
    const std::function<bool()>* outer_;
};

// Parses and renders in one call.
std::string render_chat_template(const std::string& tmpl, const nlohmann::ordered_json& context);
std::string render_chat_template(const std::string& tmpl, const nlohmann::json& context);

}  // namespace specula
