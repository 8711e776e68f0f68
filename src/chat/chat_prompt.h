// Chat prompts: how the server and the CLI turn a conversation into the prompt's text.
//
// A model's own Jinja template (the GGUF's tokenizer.chat_template, or a --chat-template-file)
// is rendered by the project's engine (chat/jinja_template.h) against the context
//
//   {"messages": [...], "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
//    "tools": [...] (only when given), ...chat_template_kwargs (e.g. "enable_thinking": false)}
//
// as llama-server and transformers render it; only a file without a template falls back to the
// built-in recognisers (chat/chat_template.h). When the tokenizer adds BOS itself, a rendered
// prompt that starts with the BOS text loses that text, so the prompt never holds BOS twice.
// Every failure (a syntax error, raise_exception, a run-time error) is a specula::Error whose
// message names the template's origin and the engine's error.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "chat/chat_template.h"
#include "chat/content_guard.h"
#include "chat/jinja_template.h"
#include "chat/tool_calls.h"

namespace specula {

struct ChatTokens {
    std::string bos, eos;    // the vocabulary's BOS and EOS texts ("" when none)
    bool strip_bos = false;  // the tokenizer adds BOS: a leading BOS text is dropped
};

class ChatPrompter {
  public:
    // The model's template, parsed; Error naming `origin` when it does not parse.
    static ChatPrompter jinja(const std::string& source, const std::string& origin,
                              ChatTokens tokens);
    // A built-in format (no Jinja), e.g. for a file without a template.
    static ChatPrompter builtin(ChatFormat format, const std::string& origin);

    bool is_jinja() const { return tmpl_ != nullptr; }
    ChatFormat format() const { return format_; }
    // e.g. "jinja (the model's tokenizer.chat_template)" or "chatml (--chat-template)".
    std::string describe() const;
    // Whether the template writes <think> (a reasoning model's template).
    bool mentions_think() const { return thinks_; }
    // The template's reasoning controls: an enable_thinking switch (Qwen3, GLM, ...) and a
    // reasoning_effort variable (gpt-oss); what reasoning_effort maps to.
    bool has_thinking_switch() const { return thinking_switch_; }
    bool has_effort_variable() const { return effort_variable_; }
    // The tool-call format the template teaches (chat/tool_calls.h); nullopt when it shows none.
    std::optional<ToolCallFormat> tool_format() const { return tool_format_; }

    // messages: [{"role": ..., "content": "..."}, ...]; tools / kwargs: null when not given
    // (kwargs: an object merged into the context last). The built-in formats take only role and
    // content, and refuse tools, tool messages and tool calls. Throws Error.
    std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                       const nlohmann::ordered_json& tools = nullptr,
                       const nlohmann::ordered_json& kwargs = nullptr) const;
    // The texts render_guarded keeps as text in a client's JSON: the vocabulary's CONTROL and
    // UNKNOWN tokens' (special_token_texts); none until set.
    void guard_content(const std::vector<std::string>& specials) {
        guard_ = std::make_shared<const ContentGuard>(specials);
    }
    // render(), and where the rendered text holds special-token texts that came from the
    // client's JSON (messages, tools, kwargs): those spans are tokenized as text
    // (chat/content_guard.h). The text is render()'s.
    GuardedText render_guarded(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                               const nlohmann::ordered_json& tools = nullptr,
                               const nlohmann::ordered_json& kwargs = nullptr) const;

  private:
    std::shared_ptr<const ChatTemplate> tmpl_;
    ChatFormat format_ = ChatFormat::Plain;
    std::string origin_;
    ChatTokens tokens_;
    std::shared_ptr<const ContentGuard> guard_;  // guard_content's
    bool thinks_ = false;
    bool thinking_switch_ = false, effort_variable_ = false;
    std::optional<ToolCallFormat> tool_format_;
};

// The template in a file (--chat-template-file): Error naming the file when it cannot be read,
// is empty, or does not parse.
ChatPrompter load_chat_template_file(const std::string& path, ChatTokens tokens);

}  // namespace specula
