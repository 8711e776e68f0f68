// The reasoning split (chat/reasoning.h): <think> blocks at the start of the output become
// reasoning, the rest content; streamed in pieces cut anywhere (inside a tag too) it gives
// exactly what splitting the whole text gives, and releases reasoning before the block closes.
#include <gtest/gtest.h>

#include "chat/reasoning.h"
#include "common/error.h"

namespace {

using specula::ReasoningParts;
using specula::ReasoningSplitter;
using specula::split_reasoning;

void expect_split(const std::string& text, bool open, const std::string& reasoning,
                  const std::string& content) {
    const ReasoningParts p = split_reasoning(text, open);
    EXPECT_EQ(p.reasoning, reasoning) << "text: " << text;
    EXPECT_EQ(p.content, content) << "text: " << text;
}

TEST(ChatReasoning, SplitsAThinkBlockAtTheStart) {
    expect_split("<think>\nLet me see.\n</think>\n\nThe answer is 4.", false, "Let me see.",
                 "The answer is 4.");
    expect_split("  \n<think>a\n\nb</think>c ", false, "a\n\nb", "c ");
    expect_split("<think>\n\n</think>\n\nHi", false, "", "Hi");  // Qwen3 with thinking off
}

TEST(ChatReasoning, TextWithoutALeadingThinkIsContentByteForByte) {
    expect_split("Hello <think>x</think> there", false, "", "Hello <think>x</think> there");
    expect_split("  plain\n", false, "", "  plain\n");
    expect_split("<thi", false, "", "<thi");
    expect_split("<thinking>no</thinking>", false, "", "<thinking>no</thinking>");
    expect_split("", false, "", "");
}

TEST(ChatReasoning, NeverClosedBlockIsAllReasoning) {
    expect_split("<think>I keep thinking", false, "I keep thinking", "");
    expect_split("<think>cut at </thi", false, "cut at </thi", "");
    expect_split("<think>\n  \n", false, "", "");
}

TEST(ChatReasoning, PromptThatOpenedTheBlock) {
    EXPECT_TRUE(specula::prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
    EXPECT_FALSE(specula::prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    EXPECT_FALSE(specula::prompt_opens_reasoning("<|im_start|>assistant\n"));
    EXPECT_FALSE(specula::prompt_opens_reasoning(""));
    expect_split("step 1\n</think>\n\nDone.", true, "step 1", "Done.");
    expect_split("no close at all", true, "no close at all", "");
    expect_split("<think>", true, "<think>", "");  // inside the block a second tag is text
}

// Every way to cut the text into up to three pieces streams to the whole text's split.
TEST(ChatReasoning, StreamingCutsAnywhereGiveTheWholeSplit) {
    const std::vector<std::pair<std::string, bool>> texts = {
        {"<think>\nab c\n</think>\n\nAnswer </think> x", false},
        {" <think>x</think>y", false},
        {"<think>never </thin", false},
        {"<th>no", false},
        {"plain text", false},
        {"r1 </think>\n c", true},
        {"\n\n", true},
    };
    for (const auto& [text, open] : texts) {
        const ReasoningParts whole = split_reasoning(text, open);
        const size_t n = text.size();
        for (size_t i = 0; i <= n; ++i) {
            for (size_t j = i; j <= n; ++j) {
                ReasoningSplitter s(open);
                ReasoningParts got;
                for (const std::string_view piece :
                     {std::string_view(text).substr(0, i), std::string_view(text).substr(i, j - i),
                      std::string_view(text).substr(j)}) {
                    const ReasoningParts d = s.push(piece);
                    // Reasoning never follows content.
                    if (!got.content.empty()) {
                        EXPECT_TRUE(d.reasoning.empty()) << text;
                    }
                    got.reasoning += d.reasoning;
                    got.content += d.content;
                }
                const ReasoningParts tail = s.finish();
                got.reasoning += tail.reasoning;
                got.content += tail.content;
                ASSERT_EQ(got.reasoning, whole.reasoning) << text << " cut at " << i << ", " << j;
                ASSERT_EQ(got.content, whole.content) << text << " cut at " << i << ", " << j;
            }
        }
    }
}

TEST(ChatReasoning, ReleasesTextAsSoonAsItIsCertain) {
    ReasoningSplitter s;
    EXPECT_TRUE(s.push("<thi").empty());  // could still be the tag
    EXPECT_EQ(s.push("nk>\nstep one").reasoning, "step one");
    EXPECT_TRUE(s.push("\n</th").empty());  // whitespace and a possible close are held
    ReasoningParts d = s.push("ink>\n\nAns");
    EXPECT_EQ(d.reasoning, "");
    EXPECT_EQ(d.content, "Ans");
    EXPECT_EQ(s.push("wer").content, "wer");
    EXPECT_TRUE(s.finish().empty());

    ReasoningSplitter t;
    EXPECT_EQ(t.push("Hi").content, "Hi");  // not a tag: content at once
}

TEST(ChatReasoning, FormatNames) {
    using specula::ReasoningFormat;
    EXPECT_EQ(specula::parse_reasoning_format("none", "x"), ReasoningFormat::none);
    EXPECT_EQ(specula::parse_reasoning_format("deepseek", "x"), ReasoningFormat::deepseek);
    EXPECT_EQ(specula::parse_reasoning_format("auto", "x"), ReasoningFormat::automatic);
    try {
        specula::parse_reasoning_format("qwen", "--reasoning-format");
        FAIL() << "accepted qwen";
    } catch (const specula::Error& e) {
        EXPECT_NE(std::string(e.what()).find("--reasoning-format must be none, deepseek or auto"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
