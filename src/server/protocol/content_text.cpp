// content_text: see content_text.h.
#include "server/protocol/content_text.h"

#include "server/protocol/api_error.h"

namespace specula {

std::string content_text(const nlohmann::ordered_json& content, const std::string& where,
                         std::initializer_list<const char*> types, const char* joiner) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array())
        bad_request("'" + where + "' must be a string or an array of text parts", where);
    std::string out;
    for (size_t i = 0; i < content.size(); ++i) {
        const nlohmann::ordered_json& p = content[i];
        const std::string at = where + "[" + std::to_string(i) + "]";
        const std::string type = p.is_object() ? p.value("type", "") : "";
        bool known = false;
        for (const char* t : types) known = known || type == t;
        if (!known || !p.contains("text") || !p["text"].is_string())
            bad_request("'" + at + "': a part of type '" + type + "' with a text is expected here",
                        at);
        out += (i ? joiner : "") + p["text"].get<std::string>();
    }
    return out;
}

}  // namespace specula
