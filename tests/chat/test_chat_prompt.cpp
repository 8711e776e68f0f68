// Chat prompts (chat/chat_prompt.h): a Jinja template rendered with messages,
// add_generation_prompt, bos/eos texts and chat_template_kwargs; a leading BOS text dropped when
// the tokenizer adds BOS; failures name the template's origin; the built-in formats as fallback.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "chat/chat_prompt.h"
#include "common/error.h"

namespace {

using json = nlohmann::ordered_json;
using specula::ChatPrompter;
using specula::ChatTokens;

const std::string kTemplate =
    "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{{ eos_token }}"
    "{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}"
    "{% if enable_thinking is defined %}think={{ enable_thinking }}{% endif %}"
    "{% if tools %}tools={{ tools | length }}{% endif %}";

const json kMessages =
    json::array({{{"role", "system"}, {"content", "S"}}, {{"role", "user"}, {"content", "Hi"}}});

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const specula::Error& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(ChatPrompt, RendersTheContextAndDropsALeadingBos) {
    const ChatPrompter keep = ChatPrompter::jinja(kTemplate, "test", ChatTokens{"<s>", "</s>"});
    EXPECT_TRUE(keep.is_jinja());
    EXPECT_EQ(keep.render(kMessages, true), "<s>[system]S</s>[user]Hi</s>[assistant]");
    EXPECT_EQ(keep.render(kMessages, false), "<s>[system]S</s>[user]Hi</s>");
    const ChatPrompter strip =
        ChatPrompter::jinja(kTemplate, "test", ChatTokens{"<s>", "</s>", true});
    EXPECT_EQ(strip.render(kMessages, true, nullptr, {{"enable_thinking", false}}),
              "[system]S</s>[user]Hi</s>[assistant]think=false");
    EXPECT_EQ(strip.render(kMessages, true, json::array({{{"type", "function"}}})),
              "[system]S</s>[user]Hi</s>[assistant]tools=1");
    EXPECT_EQ(strip.describe(), "jinja (test)");
    EXPECT_FALSE(strip.mentions_think());
    EXPECT_TRUE(ChatPrompter::jinja("<think>", "t", {}).mentions_think());
}

TEST(ChatPrompt, FailuresNameTheTemplate) {
    const ChatPrompter raising = ChatPrompter::jinja(
        "{% if messages[0].role == 'system' %}{{ raise_exception('no system role') }}{% endif %}",
        "the model's tokenizer.chat_template", {});
    EXPECT_EQ(error_of([&] { raising.render(kMessages, true); }),
              "the chat template (the model's tokenizer.chat_template) failed: chat template "
              "raised: no system role");
    const std::string bad = error_of([] { ChatPrompter::jinja("{% for %}", "x.jinja", {}); });
    EXPECT_EQ(bad.rfind("the chat template (x.jinja) does not parse: ", 0), 0u) << bad;
    const ChatPrompter good = ChatPrompter::jinja(kTemplate, "t", {});
    EXPECT_NE(error_of([&] {
                  good.render(kMessages, true, nullptr, json::array());
              }).find("chat_template_kwargs must be an object"),
              std::string::npos);
}

TEST(ChatPrompt, TemplateFiles) {
    const auto dir = std::filesystem::temp_directory_path() / "specula_test_chat_prompt";
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "t.jinja").string();
    std::ofstream(path) << kTemplate;
    const ChatPrompter p = specula::load_chat_template_file(path, ChatTokens{"<s>", "</s>"});
    EXPECT_EQ(p.describe(), "jinja (--chat-template-file " + path + ")");
    EXPECT_EQ(p.render(kMessages, true), "<s>[system]S</s>[user]Hi</s>[assistant]");
    const std::string missing = (dir / "missing.jinja").string();
    EXPECT_EQ(error_of([&] { specula::load_chat_template_file(missing, {}); }),
              "--chat-template-file: cannot read '" + missing + "'");
    std::ofstream(dir / "bad.jinja") << "{{ unclosed";
    EXPECT_NE(error_of([&] {
                  specula::load_chat_template_file((dir / "bad.jinja").string(), {});
              }).find("bad.jinja) does not parse"),
              std::string::npos);
}

TEST(ChatPrompt, BuiltinFormatsAreTheFallback) {
    const ChatPrompter p = ChatPrompter::builtin(specula::ChatFormat::ChatML, "fallback");
    EXPECT_FALSE(p.is_jinja());
    EXPECT_EQ(p.render(kMessages, true),
              "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
              "<|im_start|>assistant\n");
    EXPECT_NE(error_of([&] {
                  p.render(kMessages, true, json::array());
              }).find("tools need a Jinja chat template"),
              std::string::npos);
}

}  // namespace
