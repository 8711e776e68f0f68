// The hostile schemas of issue 45 through the request parser (server/protocol/request.h), as
// response_format and vLLM's guided_json: the $ref ladder (8 properties x 8 levels of $defs, each
// property a $ref to the next level) compiles to 17 nodes in milliseconds; 5 x 64 and a schema
// past the node cap are a 400 naming the limit and the field, quickly.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/clock.h"
#include "server/protocol/api_error.h"
#include "server/protocol/request.h"

using namespace specula;
using json = nlohmann::json;

namespace {

json ladder(int props, int levels) {
    json defs = json::object();
    for (int l = 0; l < levels; ++l) {
        json p = json::object(), req = json::array();
        for (int i = 0; i < props; ++i) {
            const std::string name = "p" + std::to_string(i);
            p[name] = l + 1 < levels ? json{{"$ref", "#/$defs/L" + std::to_string(l + 1)}}
                                     : json{{"type", "string"}};
            req.push_back(name);
        }
        defs["L" + std::to_string(l)] = {{"type", "object"}, {"properties", p}, {"required", req}};
    }
    return {{"$defs", defs}, {"$ref", "#/$defs/L0"}};
}

json chat_with(const char* field, const json& schema) {
    json body = {{"messages", {{{"role", "user"}, {"content", "x"}}}}};
    if (std::string(field) == "response_format")
        body[field] = {{"type", "json_schema"},
                       {"json_schema", {{"name", "h"}, {"schema", schema}}}};
    else
        body[field] = schema;
    return body;
}

// The ApiError's body, or null when the request parses.
json refusal(const json& body, double& ms) {
    const auto t0 = clock_type::now();
    try {
        (void)parse_completion_request(body, true);
    } catch (const ApiError& e) {
        ms = ms_since(t0);
        EXPECT_EQ(e.status(), 400);
        return e.body();
    }
    ms = ms_since(t0);
    return nullptr;
}

}  // namespace

TEST(RequestGrammar, RefLadderCompilesSmall) {
    for (const char* field : {"response_format", "guided_json"}) {
        const auto t0 = clock_type::now();
        const CompletionRequest r = parse_completion_request(chat_with(field, ladder(8, 8)), true);
        EXPECT_LT(ms_since(t0), 500.0) << field;
        ASSERT_TRUE(r.grammar) << field;
        EXPECT_EQ(r.grammar->nodes.size(), 17u) << field;
    }
}

TEST(RequestGrammar, LimitsAreA400NamingThem) {
    double ms = 0;
    for (const char* field : {"response_format", "guided_json"}) {
        const json deep = refusal(chat_with(field, ladder(5, 64)), ms);
        ASSERT_FALSE(deep.is_null()) << field;
        EXPECT_NE(deep["error"]["message"].get<std::string>().find("nested deeper than 16 levels"),
                  std::string::npos)
            << deep.dump();
        EXPECT_EQ(deep["error"]["param"], field);
        EXPECT_LT(ms, 500.0);
    }
    // 300 objects of 60 properties (in groups of 50): 18308 nodes, past the 16384 cap.
    json groups = json::object();
    for (int i = 0; i < 300; ++i) {
        json q = json::object();
        for (int k = 0; k < 60; ++k) q["s" + std::to_string(k)] = {{"type", "string"}};
        groups["g" + std::to_string(i / 50)]["type"] = "object";
        groups["g" + std::to_string(i / 50)]["properties"]["o" + std::to_string(i)] = {
            {"type", "object"}, {"properties", q}};
    }
    const json big =
        refusal(chat_with("guided_json", {{"type", "object"}, {"properties", groups}}), ms);
    ASSERT_FALSE(big.is_null());
    EXPECT_NE(big["error"]["message"].get<std::string>().find(
                  "more than 16384 nodes (the limit on a schema's size"),
              std::string::npos)
        << big.dump();
    EXPECT_LT(ms, 1500.0);
}
