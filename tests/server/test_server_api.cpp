// `specula serve` as OpenAI, vLLM and llama-server clients use it (issue #13), against the real
// stories260K target with llama2xs as the draft model:
//  - every request field of OpenAI's /v1/completions and /v1/chat/completions (from its API
//    reference) is either honoured (200) or refused with a 400 naming it; unknown fields too;
//  - logprobs come from the target's (constrained) distribution: identical with and without
//    speculation, the chosen greedy token is the top alternative (the prompt's logprobs:
//    test_server_logprobs.cpp);
//  - response_format json_object / json_schema: every output parses and matches its schema with
//    speculation on (pattern / minLength / maxLength too), and greedy speculative output equals
//    plain output; with a draft length of 0 the grammar-forced tokens are still drafted and
//    accepted (timings.draft_n_forced_accepted);
//  - penalties and logit_bias change the output and stay exact under speculation; n > 1; seed;
//  - /tokenize and /detokenize (llama-server's shape), /v1/embeddings 501, --cors-origin;
//  - vLLM's and llama-server's serve flags, including the speculative-decoding guide's command.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "cli_process.h"
#include "server/server_process.h"
#include "server/serving/metrics.h"
#include "test_util.h"

namespace {

using json = nlohmann::json;
using specula::test::ServerProcess;
using Reply = specula::test::JsonReply;
using specula::test::post_json;

using specula::test::server_draft_path;
using specula::test::server_target_path;

json ok(const ServerProcess& s, const std::string& path, const json& body) {
    Reply r = post_json(s, path, body);
    EXPECT_EQ(r.status, 200) << body.dump() << " -> " << r.body.dump();
    return r.body;
}

// The data events of an SSE response, parsed ([DONE] as the string "[DONE]").
std::vector<json> sse_events(const ServerProcess& s, const std::string& path, json body) {
    body["stream"] = true;
    auto res = s.client().Post(path.c_str(), body.dump(), "application/json");
    if (!res) throw std::runtime_error("no response from " + path);
    EXPECT_EQ(res->status, 200) << res->body;
    std::vector<json> out;
    std::string rest = res->body;
    for (size_t pos; (pos = rest.find("\n\n")) != std::string::npos; rest.erase(0, pos + 2)) {
        const std::string ev = rest.substr(0, pos);
        if (ev.rfind("data: ", 0) != 0) continue;  // a comment (queue probe)
        out.push_back(ev == "data: [DONE]" ? json("[DONE]") : json::parse(ev.substr(6)));
    }
    return out;
}

json spec(int n) {
    return {{"num_speculative_tokens", n}};
}

class ServerApiTest : public specula::test::SharedServerTest<ServerApiTest> {
  public:
    static std::vector<std::string> server_args() {
        return {"-m",  server_target_path(), "-md", server_draft_path(), "--draft", "4", "-c",
                "1024"};
    }
    static const char* server_tag() { return "api"; }
};

// OpenAI's request fields, each with a value a client would send.
struct Field {
    const char* name;
    json value;
    bool implemented;  // false: refused with a 400 naming it
};

const std::vector<Field> kChatFields = {
    {"max_tokens", 3, true},
    {"max_completion_tokens", 3, true},
    {"temperature", 0.5, true},
    {"top_p", 0.9, true},
    {"n", 2, true},
    {"stream", false, true},
    {"stop", json::array({"\n"}), true},
    {"presence_penalty", 0.5, true},
    {"frequency_penalty", 0.5, true},
    {"logit_bias", {{"5", -100}}, true},
    {"logprobs", true, true},
    {"seed", 7, true},
    {"response_format", {{"type", "json_object"}}, true},
    {"user", "someone", true},
    {"safety_identifier", "h123", true},
    {"prompt_cache_key", "k", true},
    {"store", false, true},
    {"service_tier", "auto", true},
    {"modalities", json::array({"text"}), true},
    {"tool_choice", "none", true},
    {"store", true, false},
    {"service_tier", "flex", false},
    {"modalities", json::array({"text", "audio"}), false},
    {"tools", json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}}), false},
    {"tool_choice", "auto", false},
    {"functions", json::array({{{"name", "f"}}}), false},
    {"function_call", "auto", false},
    {"audio", {{"voice", "alloy"}, {"format", "wav"}}, false},
    {"prediction", {{"type", "content"}, {"content", "x"}}, false},
    {"reasoning_effort", "low", false},
    {"verbosity", "low", false},
    {"web_search_options", json::object(), false},
    {"metadata", {{"k", "v"}}, false},
    {"made_up_field", 1, false},
    {"echo", true, false},  // completions only
    // vLLM / llama-server extras
    {"top_k", 5, true},
    {"min_p", 0.1, true},
    {"repetition_penalty", 1.1, true},
    {"repeat_penalty", 1.1, true},
    {"repeat_last_n", 16, true},
    {"ignore_eos", true, true},
};

const std::vector<Field> kCompletionFields = {
    {"max_tokens", 3, true},
    {"temperature", 0.5, true},
    {"top_p", 0.9, true},
    {"n", 2, true},
    {"best_of", 1, true},
    {"best_of", 3, false},
    {"stream", false, true},
    {"stop", "\n", true},
    {"presence_penalty", -0.5, true},
    {"frequency_penalty", 0.5, true},
    {"logit_bias", {{"5", 10}}, true},
    {"logprobs", 2, true},
    {"echo", true, true},
    {"seed", 7, true},
    {"user", "someone", true},
    {"suffix", "the end", false},
    {"max_completion_tokens", 3, true},  // accepted as an alias of max_tokens
    {"top_logprobs", 2, false},          // chat only
    {"made_up_field", 1, false},
};

TEST_F(ServerApiTest, EveryOpenAIFieldIsHonouredOrRefusedByName) {
    for (bool chat : {true, false}) {
        const auto& fields = chat ? kChatFields : kCompletionFields;
        const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
        for (const Field& f : fields) {
            json body = {{"max_tokens", 3}, {"temperature", 0}};
            if (chat) {
                body["messages"] = json::array({{{"role", "user"}, {"content", "Hi"}}});
            } else {
                body["prompt"] = "Once upon a time";
            }
            body[f.name] = f.value;
            Reply r = post_json(s(), path, body);
            if (f.implemented) {
                EXPECT_EQ(r.status, 200) << path << " " << f.name << ": " << r.body.dump();
            } else {
                EXPECT_EQ(r.status, 400) << path << " " << f.name << ": " << r.body.dump();
                EXPECT_EQ(r.body["error"]["param"], f.name) << r.body.dump();
            }
        }
    }
}

TEST_F(ServerApiTest, StreamOptionsNeedStream) {
    Reply r = post_json(s(), "/v1/completions",
                        {{"prompt", "a"}, {"stream_options", {{"include_usage", true}}}});
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.body["error"]["param"], "stream_options");
    r = post_json(
        s(), "/v1/chat/completions",
        {{"messages", json::array({{{"role", "user"}, {"content", "x"}}})}, {"top_logprobs", 2}});
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.body["error"]["param"], "top_logprobs");
}

// Logprobs are the target's: the same with and without a draft model, greedy picks the top one.
TEST_F(ServerApiTest, LogprobsAreTheSameWithAndWithoutSpeculation) {
    const json base = {{"messages", json::array({{{"role", "user"}, {"content", "Tell a story"}}})},
                       {"max_tokens", 40},
                       {"temperature", 0},
                       {"logprobs", true},
                       {"top_logprobs", 3},
                       {"presence_penalty", 0.3}};
    json plain = base, specd = base;
    plain["speculative"] = spec(0);
    specd["speculative"] = spec(4);
    const json a = ok(s(), "/v1/chat/completions", plain);
    const json b = ok(s(), "/v1/chat/completions", specd);
    EXPECT_EQ(a["usage"]["speculative"]["drafted"], 0);
    EXPECT_GT(b["usage"]["speculative"]["accepted"].get<int>(), 0);
    const json& la = a["choices"][0]["logprobs"]["content"];
    ASSERT_EQ(la.size(), 40u);
    EXPECT_EQ(la, b["choices"][0]["logprobs"]["content"]);
    std::string text;
    for (const json& t : la) {
        text += t["token"].get<std::string>();
        ASSERT_EQ(t["top_logprobs"].size(), 3u);
        EXPECT_EQ(t["top_logprobs"][0]["token"], t["token"]);  // greedy: the most likely
        EXPECT_EQ(t["top_logprobs"][0]["logprob"], t["logprob"]);
        EXPECT_LE(t["logprob"].get<double>(), 0.0);
        double p = 0;
        for (const json& alt : t["top_logprobs"]) p += std::exp(alt["logprob"].get<double>());
        EXPECT_LE(p, 1.0 + 1e-5);
    }
    EXPECT_EQ(text, a["choices"][0]["message"]["content"]);
}

// Streamed: each token's logprob entry goes out with the chunk holding its text; all of them
// together equal the non-streamed list. n = 2 streams the choices one after the other.
TEST_F(ServerApiTest, StreamedLogprobsAndChoices) {
    const json req = {{"messages", json::array({{{"role", "user"}, {"content", "A cat"}}})},
                      {"max_tokens", 20},
                      {"temperature", 0},
                      {"logprobs", true},
                      {"top_logprobs", 1},
                      {"n", 2},
                      {"stream_options", {{"include_usage", true}}}};
    json whole = req;
    whole.erase("stream_options");
    const json full = ok(s(), "/v1/chat/completions", whole);
    ASSERT_EQ(full["choices"].size(), 2u);
    const std::vector<json> ev = sse_events(s(), "/v1/chat/completions", req);
    ASSERT_GE(ev.size(), 3u);
    EXPECT_EQ(ev.back(), "[DONE]");
    const json& usage_chunk = ev[ev.size() - 2];
    EXPECT_TRUE(usage_chunk["choices"].empty());
    // Equal but for the prompt tokens found cached (the streamed request runs second, in a slot
    // that may hold the same prompt: prefix reuse).
    json su = usage_chunk["usage"], fu = full["usage"];
    su.erase("prompt_tokens_details");
    fu.erase("prompt_tokens_details");
    EXPECT_EQ(su, fu);
    json content[2] = {json::array(), json::array()};
    std::string text[2];
    int finishes = 0;
    for (size_t i = 0; i + 2 < ev.size(); ++i) {
        ASSERT_EQ(ev[i]["choices"].size(), 1u);
        const json& c = ev[i]["choices"][0];
        const int k = c["index"];
        ASSERT_TRUE(k == 0 || k == 1);
        text[k] += c["delta"].value("content", "");
        if (c["logprobs"].is_object())
            for (const json& t : c["logprobs"]["content"]) content[k].push_back(t);
        if (!c["finish_reason"].is_null()) ++finishes;
    }
    EXPECT_EQ(finishes, 2);
    for (int k = 0; k < 2; ++k) {
        EXPECT_EQ(text[k], full["choices"][k]["message"]["content"]);
        EXPECT_EQ(content[k], full["choices"][k]["logprobs"]["content"]);
    }
}

// A tiny validator for the schema subset the tests use.
bool validates(const json& v, const json& schema) {
    if (schema.contains("enum")) {
        for (const json& e : schema["enum"])
            if (e == v) return true;
        return false;
    }
    const std::string type = schema.value("type", "");
    if (type == "object") {
        if (!v.is_object()) return false;
        for (const json& r : schema.value("required", json::array()))
            if (!v.contains(r.get<std::string>())) return false;
        for (const auto& [k, x] : v.items()) {
            if (!schema["properties"].contains(k)) return false;
            if (!validates(x, schema["properties"][k])) return false;
        }
        return true;
    }
    if (type == "array") {
        if (!v.is_array()) return false;
        if (schema.contains("maxItems") && v.size() > schema["maxItems"].get<size_t>())
            return false;
        for (const json& x : v)
            if (!validates(x, schema["items"])) return false;
        return true;
    }
    if (type == "integer") return v.is_number_integer();
    if (type == "number") return v.is_number();
    if (type == "boolean") return v.is_boolean();
    if (type == "string") {
        if (!v.is_string()) return false;
        const std::string& t = v.get_ref<const std::string&>();
        size_t cps = 0;  // code points: the bytes that do not continue a UTF-8 sequence
        for (unsigned char c : t) cps += (c & 0xC0) != 0x80;
        if (cps < schema.value("minLength", size_t(0))) return false;
        if (schema.contains("maxLength") && cps > schema["maxLength"].get<size_t>()) return false;
        // (ASCII patterns here: std::regex on the bytes reads them as JSON Schema does)
        if (schema.contains("pattern") &&
            !std::regex_search(t, std::regex(schema["pattern"].get<std::string>())))
            return false;
        return true;
    }
    return true;
}

const json kSchemas = json::array({
    {{"type", "object"},
     {"properties", {{"done", {{"type", "boolean"}}}, {"count", {{"type", "integer"}}}}},
     {"required", json::array({"done", "count"})},
     {"additionalProperties", false}},
    {{"type", "array"},
     {"items", {{"enum", json::array({"cat", "dog", "bird"})}}},
     {"maxItems", 3}},
    {{"type", "object"},
     {"properties",
      {{"mood", {{"enum", json::array({"happy", "sad"})}}},
       {"scores", {{"type", "array"}, {"items", {{"type", "number"}}}, {"maxItems", 2}}}}},
     {"required", json::array({"mood"})},
     {"additionalProperties", false}},
    // string keywords (issue #25)
    {{"type", "object"},
     {"properties",
      {{"code", {{"type", "string"}, {"pattern", "^[A-Z]{2}-\\d{3}$"}}},
       {"name", {{"type", "string"}, {"minLength", 3}, {"maxLength", 12}}},
       {"tag", {{"type", "string"}, {"pattern", "ok|yes"}, {"maxLength", 6}}}}},
     {"required", json::array({"code", "name", "tag"})},
     {"additionalProperties", false}},
});

TEST_F(ServerApiTest, JsonSchemaOutputsAlwaysParseAndValidateWithSpeculation) {
    int n_outputs = 0, n_forced = 0;
    for (const json& schema : kSchemas) {
        const json rf = {{"type", "json_schema"},
                         {"json_schema", {{"name", "t"}, {"schema", schema}}}};
        for (int seed = 1; seed <= 3; ++seed) {
            const json r = ok(s(), "/v1/chat/completions",
                              {{"messages", json::array({{{"role", "user"}, {"content", "Go"}}})},
                               {"max_tokens", 500},  // bounds every output of these schemas
                               {"temperature", 0.8},
                               {"seed", seed},
                               {"response_format", rf}});
            const std::string out = r["choices"][0]["message"]["content"];
            EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << out;
            const json v = json::parse(out, nullptr, false);
            ASSERT_FALSE(v.is_discarded()) << out;
            EXPECT_TRUE(validates(v, schema)) << schema.dump() << " <- " << out;
            ++n_outputs;
        }
        // Greedy: speculative equals plain, token for token.
        json req = {{"prompt", "Once upon a time"},
                    {"max_tokens", 500},
                    {"temperature", 0},
                    {"response_format", rf}};
        req["speculative"] = spec(0);
        const json a = ok(s(), "/v1/completions", req);
        req["speculative"] = spec(4);
        const json b = ok(s(), "/v1/completions", req);
        EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]);
        EXPECT_GT(b["usage"]["speculative"]["drafted"].get<int>(), 0);
        // Without a drafter, the tokens the schema forces are drafted all the same.
        n_forced += a["timings"].value("draft_n_forced_accepted", 0);
        EXPECT_TRUE(validates(json::parse(a["choices"][0]["text"].get<std::string>()), schema));
    }
    EXPECT_EQ(n_outputs, 12);
    EXPECT_GT(n_forced, 0);
}

TEST_F(ServerApiTest, JsonObjectModeAndBadSchemas) {
    // stories260K never ends a free-form object by itself (it writes dialogue as keys and values
    // until max_tokens), so a logit bias on "}" (token 128) lets it close: grammar + bias.
    const json tk = ok(s(), "/tokenize", {{"content", "a}"}, {"with_pieces", true}});
    ASSERT_EQ(tk["tokens"][1]["piece"], "}");
    const int close = tk["tokens"][1]["id"];
    for (int seed = 1; seed <= 4; ++seed) {
        const json r = ok(s(), "/v1/completions",
                          {{"prompt", "Once"},
                           {"max_tokens", 600},
                           {"temperature", 0.7},
                           {"seed", seed},
                           {"logit_bias", {{std::to_string(close), 15}}},
                           {"response_format", {{"type", "json_object"}}}});
        const std::string out = r["choices"][0]["text"];
        EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << out;
        const json v = json::parse(out, nullptr, false);
        EXPECT_TRUE(v.is_object()) << out;
    }
    Reply bad =
        post_json(s(), "/v1/completions",
                  {{"prompt", "x"},
                   {"response_format",
                    {{"type", "json_schema"},
                     {"json_schema", {{"schema", {{"type", "string"}, {"pattern", "(a)\\1"}}}}}}}});
    EXPECT_EQ(bad.status, 400);
    EXPECT_NE(
        bad.body["error"]["message"].get<std::string>().find("'pattern' at /: a backreference"),
        std::string::npos)
        << bad.body.dump();
    bad = post_json(s(), "/v1/completions",
                    {{"prompt", "x"}, {"response_format", {{"type", "yaml"}}}});
    EXPECT_EQ(bad.status, 400);
    EXPECT_EQ(bad.body["error"]["param"], "response_format.type");
}

TEST_F(ServerApiTest, PenaltiesAndLogitBiasAreAppliedAndExactUnderSpeculation) {
    json req = {{"prompt", "Once upon a time"}, {"max_tokens", 30}, {"temperature", 0}};
    const json base = ok(s(), "/v1/completions", req);
    // Ban the first greedy token: the output changes.
    // The first generated token's id: the prompt's tokens are a prefix of prompt + output's.
    const json tp = ok(s(), "/tokenize", {{"content", "Once upon a time"}, {"add_special", true}});
    const json tk =
        ok(s(), "/tokenize",
           {{"content", "Once upon a time" + base["choices"][0]["text"].get<std::string>()},
            {"add_special", true}});
    const size_t n_prompt = tp["tokens"].size();
    ASSERT_GT(tk["tokens"].size(), n_prompt);
    for (size_t i = 0; i < n_prompt; ++i) ASSERT_EQ(tk["tokens"][i], tp["tokens"][i]);
    const int first = tk["tokens"][n_prompt];
    const std::string first_piece = ok(s(), "/detokenize", {{"tokens", {first}}})["content"];
    req["logit_bias"] = {{std::to_string(first), -100}};
    req["logprobs"] = 0;
    const json banned = ok(s(), "/v1/completions", req);
    EXPECT_EQ(base["choices"][0]["text"].get<std::string>().rfind(first_piece, 0), 0u);
    EXPECT_NE(banned["choices"][0]["logprobs"]["tokens"][0], first_piece);
    EXPECT_NE(banned["choices"][0]["text"], base["choices"][0]["text"]);
    req.erase("logit_bias");
    req["frequency_penalty"] = 1.5;
    req["presence_penalty"] = 1.0;
    req["speculative"] = spec(0);
    const json pen = ok(s(), "/v1/completions", req);
    EXPECT_NE(pen["choices"][0]["text"], base["choices"][0]["text"]);
    req["speculative"] = spec(4);
    const json pen_spec = ok(s(), "/v1/completions", req);
    EXPECT_EQ(pen_spec["choices"][0]["text"], pen["choices"][0]["text"]);
    EXPECT_EQ(pen_spec["choices"][0]["logprobs"], pen["choices"][0]["logprobs"]);
    Reply bad =
        post_json(s(), "/v1/completions", {{"prompt", "x"}, {"logit_bias", {{"99999", 1}}}});
    EXPECT_EQ(bad.status, 400);
    EXPECT_EQ(bad.body["error"]["param"], "logit_bias");
    bad = post_json(s(), "/v1/completions", {{"prompt", "x"}, {"presence_penalty", 3}});
    EXPECT_EQ(bad.status, 400);
    EXPECT_EQ(bad.body["error"]["param"], "presence_penalty");
}

TEST_F(ServerApiTest, SeveralChoicesAndSeeds) {
    const json req = {
        {"prompt", "The cat"}, {"max_tokens", 16}, {"temperature", 1.0}, {"seed", 42}, {"n", 3}};
    const json a = ok(s(), "/v1/completions", req);
    const json b = ok(s(), "/v1/completions", req);
    ASSERT_EQ(a["choices"].size(), 3u);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(a["choices"][i]["index"], i);
        EXPECT_EQ(a["choices"][i]["text"], b["choices"][i]["text"]);  // seeded: reproducible
    }
    EXPECT_FALSE(a["choices"][0]["text"] == a["choices"][1]["text"] &&
                 a["choices"][1]["text"] == a["choices"][2]["text"]);
    EXPECT_EQ(a["usage"]["completion_tokens"], 48);
}

TEST_F(ServerApiTest, TokenizeDetokenizeEmbeddings) {
    const json t = ok(s(), "/tokenize", {{"content", "Hello world"}, {"with_pieces", true}});
    std::vector<int> ids;
    std::string pieces;
    for (const json& e : t["tokens"]) {
        ids.push_back(e["id"]);
        pieces += e["piece"].get<std::string>();
    }
    EXPECT_EQ(pieces, " Hello world");  // SPM: the leading space of the first piece
    const json plain = ok(s(), "/tokenize", {{"content", "Hello world"}});
    EXPECT_EQ(plain["tokens"], json(ids));
    const json with_bos = ok(s(), "/tokenize", {{"content", "Hello world"}, {"add_special", true}});
    EXPECT_EQ(with_bos["tokens"].size(), ids.size() + 1);
    EXPECT_EQ(ok(s(), "/detokenize", {{"tokens", ids}})["content"], "Hello world");
    Reply bad = post_json(s(), "/detokenize", {{"tokens", json::array({-1})}});
    EXPECT_EQ(bad.status, 400);
    EXPECT_EQ(bad.body["error"]["param"], "tokens");
    bad = post_json(s(), "/tokenize", {{"text", "x"}});
    EXPECT_EQ(bad.status, 400);
    Reply emb = post_json(s(), "/v1/embeddings", {{"input", "x"}, {"model", "m"}});
    EXPECT_EQ(emb.status, 501);
    EXPECT_TRUE(emb.body["error"]["message"].is_string());
}

TEST(ServerCors, OffByDefaultAndPreflightWhenSet) {
    {
        ServerProcess s({"-m", server_target_path()}, "cors-off");
        httplib::Client c = s.client();
        auto r = c.Get("/v1/models", {{"Origin", "https://app.example"}});
        ASSERT_TRUE(r);
        EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));
        auto pre = c.Options("/v1/chat/completions", {{"Origin", "https://app.example"},
                                                      {"Access-Control-Request-Method", "POST"}});
        ASSERT_TRUE(pre);
        EXPECT_NE(pre->status, 204);
        EXPECT_FALSE(pre->has_header("Access-Control-Allow-Origin"));
    }
    ServerProcess s(
        {"-m", server_target_path(), "--cors-origin", "https://app.example", "--api-key", "k"},
        "cors-on");
    httplib::Client c = s.client();
    auto pre = c.Options("/v1/chat/completions",
                         {{"Origin", "https://app.example"},
                          {"Access-Control-Request-Method", "POST"},
                          {"Access-Control-Request-Headers", "authorization, content-type"}});
    ASSERT_TRUE(pre);
    EXPECT_EQ(pre->status, 204);  // no API key needed for the preflight
    EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), "https://app.example");
    EXPECT_NE(pre->get_header_value("Access-Control-Allow-Methods").find("POST"),
              std::string::npos);
    EXPECT_NE(pre->get_header_value("Access-Control-Allow-Headers").find("Authorization"),
              std::string::npos);
    auto r = c.Post("/v1/completions",
                    {{"Origin", "https://app.example"}, {"Authorization", "Bearer k"}},
                    R"({"prompt": "a", "max_tokens": 2})", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "https://app.example");
    auto other = c.Get("/health", {{"Origin", "https://evil.example"}});
    ASSERT_TRUE(other);
    EXPECT_FALSE(other->has_header("Access-Control-Allow-Origin"));
}

TEST(ServerFlags, VllmGuideCommandAndLlamaServerSpellingsStart) {
    // The speculative-decoding guide's vLLM command, as pasted.
    ServerProcess guide(
        {"--model", server_target_path(), "--tensor-parallel-size", "2", "--speculative-model",
         server_draft_path(), "--num-speculative-tokens", "5", "--gpu-memory-utilization", "0.95"},
        "guide");
    EXPECT_NE(guide.log().find("--tensor-parallel-size 2 ignored"), std::string::npos)
        << guide.log();
    EXPECT_EQ(guide.log().find("--gpu-memory-utilization ignored"), std::string::npos);
    EXPECT_NE(guide.log().find("draft 5"), std::string::npos) << guide.log();
    guide.stop();
    // vllm serve MODEL --max-model-len N --served-model-name X
    ServerProcess vllm(
        {server_target_path(), "--max-model-len", "256", "--served-model-name", "tiny"}, "vllm");
    auto models = vllm.client().Get("/v1/models");
    ASSERT_TRUE(models);
    const json m = json::parse(models->body)["data"][0];
    EXPECT_EQ(m["id"], "tiny");
    EXPECT_EQ(m["max_model_len"], 256);
    vllm.stop();
    // llama-server's spellings (-dev names the device: -ngl never picks lavapipe by itself).
    ServerProcess llama({"-m", server_target_path(), "-md", server_draft_path(), "-np", "2", "-ngl",
                         "99", "-ngld", "99", "--draft-min", "1", "--draft-p-min", "0.5", "-cd",
                         "512", "-dev", specula::test::test_vulkan_device()},
                        "llama");
    EXPECT_NE(llama.log().find("slots 2"), std::string::npos) << llama.log();
#ifdef SPECULA_HAVE_VULKAN
    EXPECT_NE(llama.log().find("Vulkan device"), std::string::npos) << llama.log();
#else
    EXPECT_NE(llama.log().find("running on the CPU"), std::string::npos) << llama.log();
#endif
}

// The KV-cache gauge is the fraction of all slots' positions in use (the exposition's format is
// checked by a Prometheus parser in tests/server/metrics.test.mjs).
TEST(ServerMetrics, KvCacheUsageIsTheFractionOfSlotPositionsInUse) {
    specula::Metrics m;
    m.set_model_name("m");
    m.set_kv_capacity(2, 100);
    const std::string idle = m.render();
    EXPECT_NE(idle.find("\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0\n"), std::string::npos);
    m.set_kv_tokens(0, 30);
    m.set_kv_tokens(1, 20);
    EXPECT_NE(m.render().find("\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.25\n"),
              std::string::npos)
        << m.render();
    m.set_kv_tokens(0, 0);
    m.set_kv_tokens(5, 99);  // not a slot: ignored
    EXPECT_NE(m.render().find("\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.1\n"),
              std::string::npos);
}

}  // namespace
