// Fuzzes what a model writes through the chat reply path: every tool-call format's parser (the
// formats' table, chat/tool_format.h) and the reasoning split, over any bytes. Input: byte 0
// picks the format (low bits) and the mode (0x10: split reasoning, 0x20: the prompt opened
// <think>), byte 1 seeds where the streamed copy is cut, the rest is the model's output. A parser
// that throws, or a streamed reply (cut at every byte, and at pseudo-random places) that differs
// from the whole one, is a crash.
#include <cstdint>
#include <string_view>
#include <vector>

#include "chat/tool_calls.h"
#include "chat/tool_format.h"
#include "model_output_check.h"

using namespace specula;
using namespace specula::test;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    const auto formats = tool_format::tool_formats();
    const ToolCallFormat f{formats[data[0] % 8 % formats.size()]};
    const ReplyMode m{(data[0] & 0x10) != 0, (data[0] & 0x20) != 0};
    uint32_t seed = data[1] * 2654435761u + 1;
    const std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
    const ReplyParts whole = whole_reply(f, text, m, reply_tools());
    std::vector<size_t> at;
    for (size_t i = 1; i < text.size(); ++i) {
        seed = seed * 1664525u + 1013904223u;
        if (seed >> 29 == 0) at.push_back(i);  // 1 in 8
    }
    if (!(streamed_reply(f, cut(text, at), m, reply_tools()) == whole)) __builtin_trap();
    if (text.size() <= 256) {
        at.clear();
        for (size_t i = 1; i < text.size(); ++i) at.push_back(i);
        if (!(streamed_reply(f, cut(text, at), m, reply_tools()) == whole)) __builtin_trap();
    }
    return 0;
}
