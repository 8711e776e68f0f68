// llama-server's token endpoints and the embeddings endpoint:
//   POST /tokenize   {"content": TEXT, "add_special": false, "parse_special": true,
//                     "with_pieces": false}
//                    -> {"tokens": [id, ...]}, or with_pieces {"tokens": [{"id", "piece"}, ...]}
//                    (a piece that is not valid UTF-8 on its own comes as an array of bytes)
//   POST /detokenize {"tokens": [id, ...]} -> {"content": TEXT}
//   POST /v1/embeddings (and /embeddings): 501 in OpenAI's error shape (this server computes no
//                    embeddings).
// Bad fields are 400 naming them; unknown fields too. These routes are under the same Host,
// Content-Type and (for /v1/*) API-key checks as the others.
#pragma once

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace specula {

// Throw ApiError for bad input.
nlohmann::json tokenize_response(const Tokenizer& tok, const nlohmann::json& body);
nlohmann::json detokenize_response(const Tokenizer& tok, const nlohmann::json& body);

}  // namespace specula
