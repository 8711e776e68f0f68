// Parsing and validating the JSON bodies of POST /v1/completions and /v1/chat/completions.
// Every malformed, missing or wrong-typed field is an ApiError 400 naming the field (`param`);
// limits that need the model (context size, draft length) are checked later by the server.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"

namespace specula {

struct CompletionRequest {
    bool chat = false;
    std::string model;                  // "" when the client did not name one
    std::string prompt;                 // completions: the prompt text
    std::vector<int32_t> prompt_ids;    // completions: a prompt given as token ids
    std::vector<ChatMessage> messages;  // chat
    int64_t max_tokens = -1;   // -1: until the end of generation or a full context (64-bit, so
                               // that adding the prompt's length to it cannot overflow)
    float temperature = 0.8f;  // llama-server's sampling defaults
    int top_k = 40;
    float top_p = 0.95f;
    float min_p = 0.05f;
    uint64_t seed = 0xFFFFFFFFu;  // random
    std::vector<std::string> stop;
    bool stream = false;
    bool ignore_eos = false;
    std::optional<int> n_draft;  // "speculative": {"num_speculative_tokens": N}
};

// Throws ApiError (400) for anything malformed.
CompletionRequest parse_completion_request(const nlohmann::json& body, bool chat);

}  // namespace specula
