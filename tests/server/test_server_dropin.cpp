// `specula serve` as a drop-in for llama-server and vLLM (issue #26): request bodies as their
// clients send them (llama.cpp's web UI, llama-server's examples, vLLM's extra_body, LangChain's
// default model name) are answered as their home server answers them, against stories260K with
// llama2xs as the draft model:
//  - any `model` is served by the one model, and the reply names it; an unknown path is a 404
//    naming the path; every request, refused ones included, gets one log line;
//  - llama-server's fields at their neutral values are accepted, at other values refused by name;
//    n_predict, n_probs, json_schema; vLLM's guided_json, add_generation_prompt,
//    continue_final_message;
//  - `timings` on replies and final chunks; /completion (whole and streamed), /props, /slots;
//  - context overflow is code context_length_exceeded; ids differ across restarts.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "server/server_process.h"
#include "test_util.h"

namespace {

using json = nlohmann::json;
using specula::test::server_draft_path;
using specula::test::server_target_path;
using specula::test::ServerProcess;
using Reply = specula::test::JsonReply;
using specula::test::post_json;

// The data events of an SSE body ([DONE] as the string "[DONE]").
std::vector<json> sse(const std::string& body) {
    std::vector<json> out;
    std::string rest = body;
    for (size_t pos; (pos = rest.find("\n\n")) != std::string::npos; rest.erase(0, pos + 2)) {
        const std::string ev = rest.substr(0, pos);
        if (ev.rfind("data: ", 0) != 0) continue;
        out.push_back(ev == "data: [DONE]" ? json("[DONE]") : json::parse(ev.substr(6)));
    }
    return out;
}

json user(const std::string& text) {
    return json::array({{{"role", "user"}, {"content", text}}});
}

void expect_timings(const json& t, int predicted_n) {
    ASSERT_TRUE(t.is_object()) << t.dump();
    for (const char* k : {"prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second",
                          "predicted_n", "predicted_ms", "predicted_per_token_ms",
                          "predicted_per_second", "draft_n", "draft_n_accepted"})
        EXPECT_TRUE(t.contains(k)) << k << " missing in " << t.dump();
    EXPECT_EQ(t["predicted_n"], predicted_n) << t.dump();
    EXPECT_GT(t["prompt_n"].get<int>(), 0);
    EXPECT_GT(t["predicted_ms"].get<double>(), 0);
    EXPECT_GT(t["draft_n"].get<int>(), 0) << "the draft model drafted";
    EXPECT_LE(t["draft_n_accepted"].get<int>(), t["draft_n"].get<int>());
}

class DropIn : public specula::test::SharedServerTest<DropIn> {
  public:
    static std::vector<std::string> server_args() {
        return {"-m",  server_target_path(), "-md", server_draft_path(), "--draft", "4", "-c",
                "512", "--parallel",         "2"};
    }
    static const char* server_tag() { return "dropin"; }
};

TEST_F(DropIn, AnyModelNameIsServedAndTheReplyNamesTheRealOne) {
    // LangChain JS's default, an OpenAI name, and the path a vLLM user gave --model.
    for (const std::string& name :
         std::vector<std::string>{"gpt-3.5-turbo", "gpt-4o", server_target_path()}) {
        Reply r = post_json(s(), "/v1/chat/completions",
                            {{"model", name}, {"messages", user("Hi")}, {"max_tokens", 2}});
        ASSERT_EQ(r.status, 200) << name << ": " << r.text;
        EXPECT_EQ(r.body["model"], "stories260K");
    }
}

TEST_F(DropIn, UnknownPathIsA404NamingThePathAndEveryRequestIsLogged) {
    auto res = s().client().Get("/v1/no-such-thing");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 404);
    const json e = json::parse(res->body);
    EXPECT_NE(e["error"]["message"].get<std::string>().find("GET /v1/no-such-thing"),
              std::string::npos)
        << res->body;
    Reply bad = post_json(s(), "/v1/completions", {{"prompt", "a"}, {"mirostat", 2}});
    EXPECT_EQ(bad.status, 400);
    post_json(s(), "/v1/completions", {{"prompt", "a"}, {"max_tokens", 1}});
    // A reply is logged once it is sent, by the thread that served it: a line may come after the
    // client has the reply, and after a later request's line (each request is its own connection).
    const std::vector<std::string> lines = {"request: GET /v1/no-such-thing 404",
                                            "request: POST /v1/completions 400",
                                            "request: POST /v1/completions 200"};
    auto all_logged = [&](const std::string& text) {
        for (const std::string& l : lines)
            if (text.find(l) == std::string::npos) return false;
        return true;
    };
    std::string log = s().log();
    for (int i = 0; i < 250 && !all_logged(log); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        log = s().log();
    }
    for (const std::string& l : lines)
        EXPECT_NE(log.find(l), std::string::npos) << l << "\n" << log;
}

// llama.cpp's web UI (examples/server/webui, app.context.tsx) sends this with its default
// settings: every llama-server sampling field at the value that turns it off.
TEST_F(DropIn, LlamaCppWebUiRequestStreamsWithTimings) {
    json body = {
        {"messages", json::array({{{"role", "system"}, {"content", "You are a helpful assistant."}},
                                  {{"role", "user"}, {"content", "Tell a story"}}})},
        {"stream", true},
        {"cache_prompt", true},
        {"samplers", "edkypmxt"},
        {"temperature", 0.8},
        {"dynatemp_range", 0.0},
        {"dynatemp_exponent", 1.0},
        {"top_k", 40},
        {"top_p", 0.95},
        {"min_p", 0.05},
        {"typical_p", 1.0},
        {"xtc_probability", 0.0},
        {"xtc_threshold", 0.1},
        {"repeat_last_n", 64},
        {"repeat_penalty", 1.0},
        {"presence_penalty", 0.0},
        {"frequency_penalty", 0.0},
        {"dry_multiplier", 0.0},
        {"dry_base", 1.75},
        {"dry_allowed_length", 2},
        {"dry_penalty_last_n", -1},
        {"max_tokens", 12},
        {"timings_per_token", true}};
    Reply r = post_json(s(), "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.text;
    const auto events = sse(r.text);
    ASSERT_GE(events.size(), 3u);
    EXPECT_EQ(events.back(), "[DONE]");
    const json& last = events[events.size() - 2];
    ASSERT_FALSE(last["choices"][0]["finish_reason"].is_null()) << last.dump();
    expect_timings(last["timings"], 12);
    // timings_per_token: every chunk with text carries the timings so far, as llama-server sends
    // them (its web UI shows tokens/s live from them); without it, only the final chunk does.
    int n_timed = 0, last_n = 0;
    for (size_t i = 0; i + 2 < events.size(); ++i) {
        const json& d = events[i]["choices"][0]["delta"];
        if (!d.contains("content") || d["content"].get<std::string>().empty()) continue;
        ASSERT_TRUE(events[i].contains("timings")) << events[i].dump();
        const int n = events[i]["timings"]["predicted_n"].get<int>();
        EXPECT_GE(n, std::max(last_n, 1)) << events[i].dump();
        EXPECT_LE(n, 12);
        EXPECT_GT(events[i]["timings"]["prompt_n"].get<int>(), 0);
        last_n = n;
        ++n_timed;
    }
    EXPECT_GE(n_timed, 1);  // a small model may send all its text in one chunk
    body["timings_per_token"] = false;
    const auto plain = sse(post_json(s(), "/v1/chat/completions", body).text);
    ASSERT_GE(plain.size(), 3u);
    for (size_t i = 0; i + 2 < plain.size(); ++i)
        EXPECT_FALSE(plain[i].contains("timings")) << plain[i].dump();
}

// llama-server's fields: accepted where neutral, refused by name where they would change the
// output in a way Specula does not implement.
TEST_F(DropIn, LlamaServerAndVllmFieldsAreNeutralOrRefusedByName) {
    struct Case {
        const char* name;
        json value;
        bool ok;
    };
    const std::vector<Case> cases = {
        {"cache_prompt", true, true},
        {"cache_prompt", false, true},
        {"typical_p", 1, true},
        {"typical_p", 0.5, true},  // locally typical sampling
        {"typical_p", 1.5, false},
        {"mirostat", 0, true},
        {"mirostat", 2, false},
        {"mirostat_tau", 5.0, true},
        {"tfs_z", 1, true},
        {"tfs_z", 0.9, false},
        {"id_slot", -1, true},
        {"id_slot", 1, true},
        {"timings_per_token", false, true},
        {"timings_per_token", "yes", false},
        {"penalize_nl", false, true},
        {"penalize_nl", true, false},
        {"n_keep", 0, true},
        {"samplers", json::array({"top_k", "typ_p", "top_p", "min_p", "temperature"}), true},
        {"samplers", json::array({"temperature", "top_k", "top_p", "min_p"}), false},
        {"samplers", "kt", false},
        {"samplers", "edskypmxt", true},
        {"samplers", "ykpmt", false},  // typical before top-k: not Specula's order
        {"top_n_sigma", -1, true},
        {"top_n_sigma", 1.5, true},
        {"top_n_sigma", "1", false},
        {"dry_multiplier", 0.8, true},  // DRY (test_server_dry)
        {"dry_multiplier", -0.8, false},
        {"dry_base", 0.5, true},  // DRY off: llama.cpp's "off" base is harmless
        {"samplers", "dkypmt", true},
        {"samplers", "kdpmt", false},    // DRY after top-k: not Specula's order
        {"xtc_probability", 0.5, true},  // XTC (test_server_dry_xtc)
        {"xtc_probability", 2, false},
        {"samplers", "kypmxt", true},
        {"samplers", "kypxmt", false},  // XTC before min-p: not Specula's order
        {"grammar", "", true},
        {"grammar", "root ::= \"a\"", false},
        {"n_probs", 0, true},
        // vLLM's extra_body
        {"skip_special_tokens", true, true},
        {"skip_special_tokens", false, false},
        {"min_tokens", 0, true},
        {"min_tokens", 5, false},
        {"include_stop_str_in_output", false, true},
        {"include_stop_str_in_output", true, true},
        {"stop_token_ids", json::array(), true},
        {"stop_token_ids", json::array({2}), true},
        {"stop_token_ids", json::array({100000}), false},
        {"stop_token_ids", "2", false},
        {"guided_choice", json::array({"yes", "no"}), false},
        {"guided_regex", "[a-z]+", false},
        {"use_beam_search", false, true},
        {"request_id", "r-1", true},
        {"made_up_field", 1, false},
    };
    for (const Case& c : cases) {
        for (const char* path : {"/v1/completions", "/completion"}) {
            json body = {{"prompt", "Once upon a time"}, {"n_predict", 2}};
            body[c.name] = c.value;
            Reply r = post_json(s(), path, body);
            if (c.ok) {
                EXPECT_EQ(r.status, 200)
                    << path << " " << c.name << "=" << c.value << ": " << r.text;
            } else {
                EXPECT_EQ(r.status, 400) << path << " " << c.name << "=" << c.value;
                EXPECT_EQ(r.body["error"]["param"], c.name) << r.text;
            }
        }
    }
}

TEST_F(DropIn, NPredictIsMaxTokensAndNProbsIsLogprobs) {
    Reply r = post_json(s(), "/v1/completions",
                        {{"prompt", "Once upon a time"}, {"n_predict", 5}, {"temperature", 0}});
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["usage"]["completion_tokens"], 5);
    expect_timings(r.body["timings"], 5);
    r = post_json(
        s(), "/v1/chat/completions",
        {{"messages", user("Hi")}, {"max_tokens", 4}, {"n_probs", 2}, {"temperature", 0}});
    ASSERT_EQ(r.status, 200) << r.text;
    const json& content = r.body["choices"][0]["logprobs"]["content"];
    ASSERT_EQ(content.size(), 4u) << r.text;
    EXPECT_EQ(content[0]["top_logprobs"].size(), 2u);
}

// vLLM's extra_body: guided_json (and llama-server's json_schema) constrain the output to the
// schema; add_generation_prompt and continue_final_message shape the prompt.
TEST_F(DropIn, VllmExtraBodyGuidedJsonAndPromptShaping) {
    const json schema = {{"type", "object"},
                         {"properties", {{"name", {{"type", "string"}}}}},
                         {"required", json::array({"name"})}};
    for (const char* field : {"guided_json", "json_schema"}) {
        Reply r = post_json(s(), "/v1/chat/completions",
                            {{"messages", user("Give JSON")},
                             {"max_tokens", 48},
                             {"temperature", 0},
                             {field, schema},
                             {"chat_template_kwargs", {{"enable_thinking", false}}},
                             {"skip_special_tokens", true},
                             {"include_stop_str_in_output", false}});
        ASSERT_EQ(r.status, 200) << r.text;
        // The schema's object starts the output (after JSON whitespace), complete or cut by
        // max_tokens; unconstrained, stories260K writes prose.
        const std::string out = r.body["choices"][0]["message"]["content"];
        const size_t first = out.find_first_not_of(" \t\r\n");
        ASSERT_NE(first, std::string::npos) << out;
        EXPECT_EQ(out[first], '{') << field << ": " << out;
        if (r.body["choices"][0]["finish_reason"] == "stop") {
            EXPECT_TRUE(json::parse(out)["name"].is_string()) << out;
        }
    }
    const json convo = json::array({{{"role", "user"}, {"content", "Tell a story"}},
                                    {{"role", "assistant"}, {"content", "Once upon"}}});
    Reply open = post_json(
        s(), "/apply-template",
        {{"messages", convo}, {"continue_final_message", true}, {"add_generation_prompt", false}});
    ASSERT_EQ(open.status, 200) << open.text;
    const std::string p = open.body["prompt"];
    EXPECT_TRUE(p.ends_with("Once upon")) << p;
    Reply closed = post_json(s(), "/apply-template", {{"messages", user("Hi")}});
    Reply no_gen = post_json(s(), "/apply-template",
                             {{"messages", user("Hi")}, {"add_generation_prompt", false}});
    EXPECT_GT(closed.body["prompt"].get<std::string>().size(),
              no_gen.body["prompt"].get<std::string>().size())
        << closed.text << " vs " << no_gen.text;
    Reply bad = post_json(s(), "/v1/chat/completions",
                          {{"messages", user("Hi")}, {"continue_final_message", true}});
    EXPECT_EQ(bad.status, 400);
    EXPECT_EQ(bad.body["error"]["param"], "continue_final_message");
}

// llama-server's /completion (its README's example request), whole and streamed.
TEST_F(DropIn, NativeCompletionWholeAndStreamed) {
    const json body = {{"prompt", "Once upon a time"}, {"n_predict", 16}, {"temperature", 0}};
    Reply whole = post_json(s(), "/completion", body);
    ASSERT_EQ(whole.status, 200) << whole.text;
    const json& w = whole.body;
    EXPECT_TRUE(w["content"].is_string());
    EXPECT_EQ(w["stop"], true);
    EXPECT_EQ(w["model"], "stories260K");
    EXPECT_EQ(w["tokens_predicted"], 16);
    EXPECT_EQ(w["stop_type"], "limit");
    EXPECT_GT(w["tokens_evaluated"].get<int>(), 0);
    EXPECT_EQ(w["generation_settings"]["n_predict"], 16);
    expect_timings(w["timings"], 16);
    Reply v1 = post_json(s(), "/v1/completions", body);
    EXPECT_EQ(w["content"], v1.body["choices"][0]["text"]) << "same greedy text as /v1";

    json sbody = body;
    sbody["stream"] = true;
    Reply streamed = post_json(s(), "/completion", sbody);
    ASSERT_EQ(streamed.status, 200);
    const auto events = sse(streamed.text);
    ASSERT_GE(events.size(), 2u);
    std::string text;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
        EXPECT_EQ(events[i]["stop"], false);
        text += events[i]["content"].get<std::string>();
    }
    const json& last = events.back();
    EXPECT_EQ(last["stop"], true) << "the last event is the whole reply; no [DONE]";
    EXPECT_EQ(last["content"], "");
    expect_timings(last["timings"], 16);
    EXPECT_EQ(text, w["content"]);

    Reply probs =
        post_json(s(), "/completion",
                  {{"prompt", "Once"}, {"n_predict", 3}, {"n_probs", 2}, {"temperature", 0}});
    ASSERT_EQ(probs.status, 200) << probs.text;
    const json& cp = probs.body["completion_probabilities"];
    ASSERT_EQ(cp.size(), 3u) << probs.text;
    EXPECT_TRUE(cp[0]["id"].is_number_integer());
    EXPECT_EQ(cp[0]["top_logprobs"].size(), 2u);
    EXPECT_EQ(cp[0]["top_logprobs"][0]["id"], cp[0]["id"]) << "greedy picks the top token";
}

// vLLM's include_stop_str_in_output keeps the stop string; stop_token_ids end the text at that
// token (kept, as vLLM keeps a non-special stop token); llama-server's stopping_word names it.
TEST_F(DropIn, StopStringKeptAndStopTokenIds) {
    const json base = {{"prompt", "Once upon a time"}, {"n_predict", 16}, {"temperature", 0}};
    Reply whole = post_json(s(), "/completion", base);
    const std::string text = whole.body["content"];
    ASSERT_NE(text.find(" was"), std::string::npos) << text;  // the greedy story has "there was"
    json stop = base;
    stop["stop"] = json::array({" was"});
    Reply cut = post_json(s(), "/completion", stop);
    EXPECT_EQ(cut.body["content"], text.substr(0, text.find(" was")));
    EXPECT_EQ(cut.body["stop_type"], "word");
    EXPECT_EQ(cut.body["stopping_word"], " was");
    stop["include_stop_str_in_output"] = true;
    Reply kept = post_json(s(), "/completion", stop);
    EXPECT_EQ(kept.body["content"], text.substr(0, text.find(" was") + 4)) << kept.text;

    // The third generated token as a stop token id: three tokens, the text of those three.
    json probs = base;
    probs["n_probs"] = 1;
    Reply p = post_json(s(), "/completion", probs);
    const json& cp = p.body["completion_probabilities"];
    ASSERT_GE(cp.size(), 4u) << p.text;
    json by_id = base;
    by_id["stop_token_ids"] = json::array({cp[2]["id"]});
    for (const json& t : {cp[0], cp[1]})
        if (t["id"] == cp[2]["id"]) GTEST_SKIP() << "the stop token came earlier";
    Reply ended = post_json(s(), "/v1/completions", by_id);
    ASSERT_EQ(ended.status, 200) << ended.text;
    EXPECT_EQ(ended.body["usage"]["completion_tokens"], 3) << ended.text;
    EXPECT_EQ(ended.body["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(ended.body["choices"][0]["text"], cp[0]["token"].get<std::string>() +
                                                    cp[1]["token"].get<std::string>() +
                                                    cp[2]["token"].get<std::string>());
}

TEST_F(DropIn, PropsAndSlots) {
    auto props = s().client().Get("/props");
    ASSERT_TRUE(props);
    ASSERT_EQ(props->status, 200);
    const json p = json::parse(props->body);
    EXPECT_EQ(p["total_slots"], 2);
    // -c 512 with --parallel 2: the slots share one pool of 512 positions (llama-server's
    // unified cache), and one request may use all of it: the context is never split.
    EXPECT_EQ(p["default_generation_settings"]["n_ctx"], 512);
    EXPECT_NE(s().log().find("2 slots share a KV pool of 512 positions; one request may use up "
                             "to 512"),
              std::string::npos)
        << s().log();
    EXPECT_EQ(p["model_path"], "stories260K") << "the name, never the path";
    auto slots = s().client().Get("/slots");
    ASSERT_TRUE(slots);
    const json sl = json::parse(slots->body);
    ASSERT_EQ(sl.size(), 2u);
    EXPECT_EQ(sl[1]["id"], 1);
    EXPECT_EQ(sl[0]["is_processing"], false);
    EXPECT_EQ(sl[0]["speculative"], true);
}

TEST_F(DropIn, ContextOverflowIsContextLengthExceeded) {
    Reply r = post_json(s(), "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 600}});
    // Both numbers: the request's and the context's.
    EXPECT_NE(r.body["error"]["message"].get<std::string>().find("512"), std::string::npos)
        << r.text;
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.body["error"]["code"], "context_length_exceeded") << r.text;
    std::string long_prompt;
    for (int i = 0; i < 400; ++i) long_prompt += "the cat ";
    r = post_json(s(), "/v1/chat/completions", {{"messages", user(long_prompt)}});
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.body["error"]["code"], "context_length_exceeded") << r.text;
}

TEST(DropInIds, IdsDifferAcrossRestarts) {
    std::vector<std::string> ids;
    for (int run = 0; run < 2; ++run) {
        ServerProcess s({"-m", server_target_path(), "-c", "128"}, "ids");
        Reply r = post_json(s, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 1}});
        ASSERT_EQ(r.status, 200);
        ids.push_back(r.body["id"]);
    }
    EXPECT_NE(ids[0], ids[1]);
}

}  // namespace

// llama-server's slot actions (--slot-save-path): save a slot's cache to a file, erase it, restore
// the file into another slot; the restored prefix is reused (not evaluated again) and the text is
// the same. Bad names, missing or foreign files, busy or unknown slots are errors naming them;
// without --slot-save-path save/restore are 501 and erase still works.
TEST(DropInSlots, SaveEraseRestore) {
    const std::string dir = specula::test::temp_dir("slots");
    ServerProcess s({"-m", server_target_path(), "-np", "2", "-c", "512", "--cache-ram", "0",
                     "--slot-save-path", dir},
                    "slots");
    const json req = {{"prompt", "Once upon a time there was a little girl named Lily"},
                      {"n_predict", 12},
                      {"temperature", 0}};
    const Reply first = post_json(s, "/completion", req);
    ASSERT_EQ(first.status, 200) << first.text;
    const int slot = first.body["id_slot"].get<int>();
    const std::string at = "/slots/" + std::to_string(slot);

    const Reply saved = post_json(s, at + "?action=save", {{"filename", "lily.bin"}});
    ASSERT_EQ(saved.status, 200) << saved.text;
    const int n = saved.body["n_saved"].get<int>();
    EXPECT_GT(n, 10);
    EXPECT_EQ(saved.body["filename"], "lily.bin");
    EXPECT_GT(saved.body["n_written"].get<int64_t>(), 0);
    const Reply erased = post_json(s, at + "?action=erase", json::object());
    ASSERT_EQ(erased.status, 200) << erased.text;
    EXPECT_EQ(erased.body["n_erased"], n);
    // Erased: the same prompt is evaluated whole again.
    const Reply cold = post_json(s, "/completion", req);
    EXPECT_EQ(cold.body["content"], first.body["content"]);
    for (int i = 0; i < 2; ++i) post_json(s, "/slots/" + std::to_string(i) + "?action=erase", {});

    const std::string other = "/slots/" + std::to_string(1 - slot);
    const Reply restored = post_json(s, other + "?action=restore", {{"filename", "lily.bin"}});
    ASSERT_EQ(restored.status, 200) << restored.text;
    EXPECT_EQ(restored.body["n_restored"], n);
    EXPECT_EQ(restored.body["n_read"], saved.body["n_written"]);
    const Reply warm = post_json(s, "/completion", req);
    ASSERT_EQ(warm.status, 200) << warm.text;
    EXPECT_EQ(warm.body["id_slot"], 1 - slot) << "the slot holding the restored prefix";
    EXPECT_EQ(warm.body["content"], first.body["content"]);
    EXPECT_LE(warm.body["timings"]["prompt_n"].get<int>(), 1) << warm.text;

    // Errors, each naming what is wrong.
    const auto expect_error = [&](const std::string& path, const json& body, int status,
                                  const std::string& needle) {
        const Reply r = post_json(s, path, body);
        EXPECT_EQ(r.status, status) << path << " " << r.text;
        EXPECT_NE(r.text.find(needle), std::string::npos) << path << " " << r.text;
    };
    expect_error(at + "?action=save", {{"filename", "../up.bin"}}, 400, "plain file name");
    expect_error(at + "?action=save", json::object(), 400, "'filename'");
    expect_error(at + "?action=restore", {{"filename", "missing.bin"}}, 400, "missing.bin");
    expect_error(at + "?action=frobnicate", json::object(), 400, "'action'");
    expect_error("/slots/9?action=erase", json::object(), 404, "no slot 9");
    const auto write = [](const std::string& path, const std::string& bytes) {
        std::ofstream(path, std::ios::binary) << bytes;
    };
    write(dir + "/junk.bin", "not a slot file at all");
    expect_error(at + "?action=restore", {{"filename", "junk.bin"}}, 400, "junk.bin");
    // A slot file of another model (the draft: another KV shape) is refused; a cut one too.
    {
        ServerProcess d(
            {"-m", server_draft_path(), "-np", "1", "-c", "512", "--slot-save-path", dir},
            "slots-draft");
        ASSERT_EQ(post_json(d, "/completion", req).status, 200);
        ASSERT_EQ(post_json(d, "/slots/0?action=save", {{"filename", "draft.bin"}}).status, 200);
    }
    expect_error(at + "?action=restore", {{"filename", "draft.bin"}}, 400,
                 "saved from another model");
    const std::string whole = specula::test::read_file(dir + "/lily.bin");
    write(dir + "/cut.bin", whole.substr(0, whole.size() - 7));
    expect_error(at + "?action=restore", {{"filename", "cut.bin"}}, 400, "truncated");

    ServerProcess plain({"-m", server_target_path(), "-np", "1", "-c", "256"}, "slots-off");
    const Reply off = post_json(plain, "/slots/0?action=save", {{"filename", "x.bin"}});
    EXPECT_EQ(off.status, 501) << off.text;
    EXPECT_NE(off.text.find("--slot-save-path"), std::string::npos) << off.text;
    EXPECT_EQ(post_json(plain, "/slots/0?action=erase", json::object()).status, 200);
}
