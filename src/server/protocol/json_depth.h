// A nesting-depth limit for request bodies, checked on the raw text before any JSON document is
// built: a body of a million `[` would otherwise cost tens of MB of nodes (and a deep recursion
// to free them) before it is refused. The scan is one pass over the bytes, no allocation; it
// skips string contents (escapes included) and does not validate anything else (the parser
// does that afterwards).
#pragma once

#include <string_view>

namespace specula {

constexpr int kMaxJsonDepth = 128;  // arrays and objects nested inside each other

// Throws ApiError 400 naming the limit when `text` nests arrays/objects deeper than `max_depth`.
void check_json_depth(std::string_view text, int max_depth = kMaxJsonDepth);

}  // namespace specula
