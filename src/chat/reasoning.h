// Reasoning split: the text a thinking model (Qwen3, DeepSeek-R1 style) writes between <think>
// and </think> is its reasoning; what follows is the answer. ReasoningSplitter takes generated
// text in pieces of any size (a tag may be cut anywhere between pieces) and hands out reasoning
// and content as soon as they are certain; finish() flushes what it held back. Splitting all the
// text at once (split_reasoning) gives exactly the concatenation of the streamed parts.
//
// Rules (llama-server's "deepseek" format): reasoning is recognised only at the start of the
// output (after whitespace), or from the first byte when the prompt already opened the block
// (prompt_opens_reasoning: the generation prompt ends in "<think>"). Whitespace around the
// reasoning and before the answer is dropped. A block never closed is all reasoning. Output that
// does not start with <think> is all content, byte for byte.
#pragma once

#include <string>
#include <string_view>

namespace specula {

// --reasoning-format / the request's reasoning_format: none leaves the text in content; deepseek
// splits it; auto splits for a template that writes <think> (or a prompt that opens it).
enum class ReasoningFormat { none, deepseek, automatic };

// "none", "deepseek" or "auto"; Error naming `what` and listing the values otherwise.
ReasoningFormat parse_reasoning_format(std::string_view name, const char* what);

// Whether the rendered prompt ends inside an open <think> block (trailing whitespace ignored).
bool prompt_opens_reasoning(std::string_view prompt);

struct ReasoningParts {
    std::string reasoning, content;
    bool empty() const { return reasoning.empty() && content.empty(); }
};

class ReasoningSplitter {
  public:
    explicit ReasoningSplitter(bool starts_open = false);

    ReasoningParts push(std::string_view text);
    ReasoningParts finish();

  private:
    enum class State { start, reasoning, content };
    void emit_reasoning(std::string_view s, ReasoningParts& out);

    State state_ = State::start;
    bool lead_ = false;       // skipping whitespace at the start of reasoning or answer
    std::string held_;        // text not yet certain (a possible tag prefix, leading spaces)
    std::string pending_ws_;  // reasoning's trailing whitespace, sent only if more follows
};

ReasoningParts split_reasoning(std::string_view text, bool starts_open = false);

}  // namespace specula
