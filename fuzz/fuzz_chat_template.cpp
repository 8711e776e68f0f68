// Fuzzes the chat-template renderer: the input up to the first NUL is a template string (its
// format is detected from its markers), the rest is messages separated by NUL, the first byte of
// each picking the role. Every format renders every message list without crashing.
#include <cstdint>
#include <string>
#include <vector>

#include "chat/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string in(reinterpret_cast<const char*>(data), size);
    const size_t nul = in.find('\0');
    const std::string tmpl = in.substr(0, nul);
    std::vector<specula::ChatMessage> msgs;
    static const char* roles[] = {"system", "user", "assistant"};
    for (size_t p = nul == std::string::npos ? in.size() : nul + 1; p < in.size();) {
        size_t e = in.find('\0', p);
        if (e == std::string::npos) e = in.size();
        const std::string m = in.substr(p, e - p);
        if (!m.empty()) msgs.push_back({roles[uint8_t(m[0]) % 3], m.substr(1)});
        p = e + 1;
    }
    const specula::ChatFormat detected = specula::detect_chat_format(tmpl);
    (void)specula::render_chat(detected, msgs, true);
    for (int f = 0; f <= int(specula::ChatFormat::Phi3); ++f)
        (void)specula::render_chat(specula::ChatFormat(f), msgs, f & 1);
    return 0;
}
