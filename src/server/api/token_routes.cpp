// Token endpoints: see token_routes.h.
#include "server/api/token_routes.h"

#include <string>

#include "common/error.h"
#include "server/protocol/api_error.h"

namespace specula {

namespace {

using json = nlohmann::json;

void only_fields(const json& body, std::initializer_list<const char*> names, const char* route) {
    if (!body.is_object()) bad_request("the request body must be a JSON object");
    for (const auto& [k, v] : body.items()) {
        bool known = false;
        for (const char* n : names) known = known || k == n;
        if (!known) bad_request("unknown field '" + k + "' for " + route, k);
    }
}

bool flag(const json& body, const char* name, bool def) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return def;
    if (!it->is_boolean()) bad_request(std::string("'") + name + "' must be a boolean", name);
    return it->get<bool>();
}

bool valid_utf8(const std::string& s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        const size_t n = c < 0x80         ? 1
                         : (c >> 5) == 6  ? 2
                         : (c >> 4) == 14 ? 3
                         : (c >> 3) == 30 ? 4
                                          : 0;
        if (n == 0 || i + n > s.size()) return false;
        for (size_t k = 1; k < n; ++k)
            if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
        i += n;
    }
    return true;
}

}  // namespace

json tokenize_response(const Tokenizer& tok, const json& body) {
    only_fields(body, {"content", "add_special", "parse_special", "with_pieces"}, "/tokenize");
    auto it = body.find("content");
    if (it == body.end() || !it->is_string()) bad_request("'content' must be a string", "content");
    const bool add_special = flag(body, "add_special", false);
    const bool parse_special = flag(body, "parse_special", true);
    const bool with_pieces = flag(body, "with_pieces", false);
    const std::vector<token_id> ids =
        tok.encode(it->get_ref<const std::string&>(), add_special, parse_special);
    json tokens = json::array();
    for (token_id id : ids) {
        if (!with_pieces) {
            tokens.push_back(id);
            continue;
        }
        const std::string piece = tok.token_to_piece(id, /*special=*/true);
        json p = piece;
        if (!valid_utf8(piece)) {
            p = json::array();
            for (unsigned char c : piece) p.push_back(int(c));
        }
        tokens.push_back({{"id", id}, {"piece", p}});
    }
    return {{"tokens", tokens}};
}

json detokenize_response(const Tokenizer& tok, const json& body) {
    only_fields(body, {"tokens"}, "/detokenize");
    auto it = body.find("tokens");
    if (it == body.end() || !it->is_array())
        bad_request("'tokens' must be an array of token ids", "tokens");
    std::vector<token_id> ids;
    for (const json& t : *it) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tok.n_vocab())
            bad_request("'tokens' holds " + t.dump() + ", not a token id in [0, " +
                            std::to_string(tok.n_vocab()) + ")",
                        "tokens");
        ids.push_back(token_id(t.get<int64_t>()));
    }
    return {{"content", tok.decode(ids, /*remove_special=*/false, /*unparse_special=*/true)}};
}

}  // namespace specula
