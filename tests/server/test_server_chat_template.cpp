// Chat templates (chat/chat_template.h): the real tokenizer.chat_template of the Llama 3
// Instruct, Qwen3 and Phi-3 vocabularies in ../shared/vocab is detected as its family and a short
// conversation renders to the hand-written string that template produces (without BOS, which the
// tokenizer adds); the other families are detected from their markers.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "gguf/gguf.h"
#include "test_util.h"

namespace {

using specula::ChatFormat;
using specula::ChatMessage;
using specula::detect_chat_format;
using specula::render_chat;

std::string template_of(const std::string& vocab) {
    auto f = specula::GGUFFile::open(specula::test::shared_path("vocab/" + vocab));
    return f->get_string("tokenizer.chat_template");
}

const std::vector<ChatMessage> kConversation = {
    {"system", "You are terse."}, {"user", "Hi!"}, {"assistant", "Hello."}, {"user", "2+2?"}};

TEST(ChatTemplate, Llama3InstructFromGGUF) {
    const ChatFormat f = detect_chat_format(template_of("ggml-vocab-llama3-instruct.gguf"));
    ASSERT_EQ(f, ChatFormat::Llama3);
    EXPECT_EQ(render_chat(f, kConversation),
              "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n");
    // The template trims each message's content.
    EXPECT_EQ(render_chat(f, {{"user", "  padded \n"}}, false),
              "<|start_header_id|>user<|end_header_id|>\n\npadded<|eot_id|>");
}

TEST(ChatTemplate, Qwen3ChatMLFromGGUF) {
    const ChatFormat f = detect_chat_format(template_of("ggml-vocab-qwen3.gguf"));
    ASSERT_EQ(f, ChatFormat::ChatML);
    EXPECT_EQ(render_chat(f, kConversation),
              "<|im_start|>system\nYou are terse.<|im_end|>\n"
              "<|im_start|>user\nHi!<|im_end|>\n"
              "<|im_start|>assistant\nHello.<|im_end|>\n"
              "<|im_start|>user\n2+2?<|im_end|>\n"
              "<|im_start|>assistant\n");
    EXPECT_EQ(render_chat(f, {{"user", "Hi!"}}, /*add_generation_prompt=*/false),
              "<|im_start|>user\nHi!<|im_end|>\n");
}

TEST(ChatTemplate, Phi3FromGGUF) {
    const ChatFormat f = detect_chat_format(template_of("ggml-vocab-phi-3.gguf"));
    ASSERT_EQ(f, ChatFormat::Phi3);
    // Phi-3's template writes the assistant opening after every user turn.
    EXPECT_EQ(render_chat(f, {{"user", "Hi!"}, {"assistant", "Hello."}, {"user", "2+2?"}}),
              "<|user|>\nHi!<|end|>\n<|assistant|>\nHello.<|end|>\n<|user|>\n2+2?<|end|>\n"
              "<|assistant|>\n");
}

TEST(ChatTemplate, FamiliesByMarker) {
    const std::string llama2 =
        "{% if messages[0]['role'] == 'system' %}<<SYS>>\\n{% endif %}[INST] {{ content }} [/INST]";
    ASSERT_EQ(detect_chat_format(llama2), ChatFormat::Llama2);
    EXPECT_EQ(render_chat(ChatFormat::Llama2, kConversation),
              "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi! [/INST] Hello.</s>[INST] 2+2? "
              "[/INST]");
    const std::string mistral =
        "{{ bos_token }}{% for m in messages %}[INST] {{ m['content'] }}"
        "[/INST]{% endfor %}";
    ASSERT_EQ(detect_chat_format(mistral), ChatFormat::Mistral);
    EXPECT_EQ(render_chat(ChatFormat::Mistral,
                          {{"user", "Hi!"}, {"assistant", "Hello."}, {"user", "2+2?"}}),
              "[INST] Hi![/INST] Hello.</s>[INST] 2+2?[/INST]");
    const std::string gemma = "{{ '<start_of_turn>' + role + '\\n' }}<end_of_turn>";
    ASSERT_EQ(detect_chat_format(gemma), ChatFormat::Gemma);
    EXPECT_EQ(render_chat(ChatFormat::Gemma, kConversation),
              "<start_of_turn>user\nYou are terse.\n\nHi!<end_of_turn>\n"
              "<start_of_turn>model\nHello.<end_of_turn>\n"
              "<start_of_turn>user\n2+2?<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTemplate, MissingOrUnknownFallsBackToPlain) {
    EXPECT_EQ(detect_chat_format(""), ChatFormat::Plain);
    EXPECT_EQ(detect_chat_format("{% for m in messages %}{{ m.content }}{% endfor %}"),
              ChatFormat::Plain);
    EXPECT_EQ(render_chat(ChatFormat::Plain, kConversation),
              "System: You are terse.\nUser: Hi!\nAssistant: Hello.\nUser: 2+2?\nAssistant:");
}

}  // namespace
