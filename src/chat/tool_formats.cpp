// The tool-call formats' table (chat/tool_format.h): one row per chat/tool_format_<name>.cpp, in
// detection order, the most specific first.
#include "chat/tool_format.h"

namespace specula {

namespace tool_format {

extern const ToolFormatSpec kHarmonyToolFormat, kQwen3CoderToolFormat, kHermesToolFormat,
    kMistralToolFormat, kLlama3ToolFormat;

namespace {

const ToolFormatSpec* const kToolFormats[] = {&kHarmonyToolFormat, &kQwen3CoderToolFormat,
                                              &kHermesToolFormat, &kMistralToolFormat,
                                              &kLlama3ToolFormat};

}  // namespace

std::span<const ToolFormatSpec* const> tool_formats() {
    return kToolFormats;
}

}  // namespace tool_format

const ToolCallFormat ToolCallFormat::hermes{&tool_format::kHermesToolFormat};

}  // namespace specula
