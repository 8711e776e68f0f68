// The text of an API message's content, as the Messages and Responses adapters read it
// (server/api/anthropic.h, server/api/openai_responses.h): a string, or an array of parts whose
// type is one of `types` and whose "text" is a string, their texts joined by `joiner`. Any other
// part is an ApiError 400 naming it (`where`: the field's path, e.g. messages[2].content).
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

namespace specula {

std::string content_text(const nlohmann::ordered_json& content, const std::string& where,
                         std::initializer_list<const char*> types, const char* joiner);

}  // namespace specula
