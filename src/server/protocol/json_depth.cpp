// check_json_depth: see json_depth.h.
#include "server/protocol/json_depth.h"

#include <string>

#include "server/protocol/api_error.h"

namespace specula {

void check_json_depth(std::string_view text, int max_depth) {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (const char c : text) {
        if (in_string) {
            if (escaped) {
                escaped = false;
            } else if (c == '\\') {
                escaped = true;
            } else if (c == '"') {
                in_string = false;
            }
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth)
                bad_request("the request body nests JSON arrays/objects deeper than the limit of " +
                            std::to_string(max_depth) + " levels");
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
}

}  // namespace specula
