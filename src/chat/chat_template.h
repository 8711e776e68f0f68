// The fallback for files without a usable template (chat/chat_prompt.h renders the model's own
// Jinja template first), and `specula chat --chat-template NAME`.
// Chat templates without a Jinja engine: the GGUF's tokenizer.chat_template text is recognised by
// the markers it contains (as llama.cpp's llama_chat_detect_template does) and one of a few
// hand-written renderers formats the conversation for that family:
//
//   chatml   <|im_start|>role\ncontent<|im_end|>\n          (ChatML, Qwen)
//   llama3   <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
//   llama2   [INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST] assistant</s>
//   mistral  [INST] user[/INST] assistant</s>   (Mistral v3/v7-style: no <<SYS>> block)
//   gemma    <start_of_turn>user\ncontent<end_of_turn>\n  (assistant is "model", system merged)
//   phi3     <|user|>\ncontent<|end|>\n<|assistant|>\n
//   plain    "System: ...\nUser: ...\nAssistant:" -- the documented default for a template that
//            is missing or not recognised.
//
// BOS is never written as text: the prompt is tokenized with the vocabulary's own BOS rule.
// add_generation_prompt appends the opening of the assistant's turn.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace specula {

enum class ChatFormat { Plain, ChatML, Llama2, Llama3, Mistral, Gemma, Phi3 };

struct ChatMessage {
    std::string role;  // "system", "user" or "assistant"
    std::string content;
};

// The family whose markers `tmpl` contains; Plain when none (or when `tmpl` is empty).
ChatFormat detect_chat_format(std::string_view tmpl);

const char* chat_format_name(ChatFormat f);

// A format chosen by hand (llama.cpp's --chat-template): one of the names above
// (chatml, llama2, llama3, mistral, gemma, phi3, plain), or a template text recognised by its
// markers. Throws Error naming the value and listing the names otherwise.
ChatFormat parse_chat_format(std::string_view name_or_template);

std::string render_chat(ChatFormat f, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt = true);

}  // namespace specula
