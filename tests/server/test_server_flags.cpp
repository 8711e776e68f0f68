// `specula serve` started with llama-server's and vLLM's launch lines as their guides and model
// cards write them: vLLM's --max-num-seqs (slots), --max-model-len (one sequence's context) and
// --max-num-batched-tokens (the prompt tokens a step takes), the flags that change nothing here
// accepted; model cards' sampling defaults; --chat-template. Against stories260K.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/server_process.h"
#include "test_util.h"

namespace {

using json = nlohmann::json;
using specula::test::server_target_path;
using specula::test::ServerProcess;
using Reply = specula::test::JsonReply;
using specula::test::post_json;

json user(const std::string& text) {
    return json::array({{{"role", "user"}, {"content", text}}});
}

// specula:batch_passes_total in /metrics.
double batch_passes(const ServerProcess& s) {
    auto res = s.client().Get("/metrics");
    if (!res) throw std::runtime_error("no /metrics");
    const std::string key = "\nspecula:batch_passes_total ";
    const size_t at = res->body.find(key);
    if (at == std::string::npos) throw std::runtime_error("no " + key.substr(1));
    return std::stod(res->body.substr(at + key.size()));
}

std::string long_prompt() {
    std::string text = "Once upon a time";
    for (int i = 0; i < 12; ++i) text += " The cat sat on the mat and looked at the big tree.";
    return text;
}

}  // namespace

// A vLLM serve command as its guides write it: --max-num-seqs is the slots, --max-model-len each
// slot's context, and the flags that change nothing here are accepted.
TEST(DropInFlags, VllmServeFlagsMap) {
    ServerProcess s({server_target_path(), "--max-num-seqs", "3", "--max-model-len", "200",
                     "--enable-prefix-caching", "--dtype", "auto", "--trust-remote-code",
                     "--disable-log-requests"},
                    "vllmflags");
    auto props = s.client().Get("/props");
    ASSERT_TRUE(props);
    const json p = json::parse(props->body);
    EXPECT_EQ(p["total_slots"], 3);
    EXPECT_EQ(p["default_generation_settings"]["n_ctx"], 200) << "per sequence, not split";
    // The pool holds every slot's whole context when the memory allows (it does here).
    EXPECT_NE(s.log().find("3 slots share a KV pool of 600 positions"), std::string::npos)
        << s.log();
    s.stop();
    EXPECT_THROW(ServerProcess({server_target_path(), "--dtype", "float16"}, "dtype"),
                 std::runtime_error);
    EXPECT_THROW(
        ServerProcess({server_target_path(), "-c", "512", "--max-model-len", "256"}, "both"),
        std::runtime_error);
}

// The launch lines model cards print start, and their sampling flags become every request's
// defaults: Qwen3's llama-server line (greedy here, so the defaults can be seen) and vLLM's tool
// and reasoning line; a request's own field wins.
TEST(DropInFlags, ModelCardLaunchLinesSetTheDefaults) {
    ServerProcess s({"-m",
                     server_target_path(),
                     "--jinja",
                     "-c",
                     "512",
                     "-n",
                     "24",
                     "--no-context-shift",
                     "--temp",
                     "0",
                     "--top-k",
                     "20",
                     "--top-p",
                     "0.95",
                     "--min-p",
                     "0",
                     "--enable-auto-tool-choice",
                     "--tool-call-parser",
                     "hermes",
                     "--reasoning-parser",
                     "qwen3",
                     "--seed",
                     "5",
                     "--enforce-eager",
                     "--kv-cache-dtype",
                     "fp8"},
                    "cardline");
    EXPECT_NE(s.log().find("--kv-cache-dtype fp8: the KV cache is q8_0"), std::string::npos)
        << s.log();
    // -n 24: a request without max_tokens generates 24 (ignore_eos keeps it going).
    Reply a =
        post_json(s, "/v1/completions", {{"prompt", "Once upon a time"}, {"ignore_eos", true}});
    ASSERT_EQ(a.status, 200) << a.text;
    EXPECT_EQ(a.body["usage"]["completion_tokens"], 24) << a.text;
    // --temp 0: greedy by default, the same text as an explicit temperature 0.
    Reply b = post_json(s, "/v1/completions",
                        {{"prompt", "Once upon a time"}, {"ignore_eos", true}, {"temperature", 0}});
    ASSERT_EQ(b.status, 200) << b.text;
    EXPECT_EQ(a.body["choices"][0]["text"], b.body["choices"][0]["text"]);
    // The request's own fields win: max_tokens, and a temperature that samples.
    Reply c = post_json(s, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 5}});
    EXPECT_EQ(c.body["usage"]["completion_tokens"].get<int>(), 5) << c.text;
    // /props reports those defaults, as llama-server's web UI reads them.
    auto props = s.client().Get("/props");
    ASSERT_TRUE(props);
    const json g = json::parse(props->body)["default_generation_settings"]["params"];
    EXPECT_EQ(g["n_predict"], 24) << g.dump();
    EXPECT_EQ(g["temperature"], 0.0) << g.dump();
    EXPECT_EQ(g["top_k"], 20) << g.dump();
    EXPECT_EQ(g["min_p"], 0.0) << g.dump();
    EXPECT_EQ(g["seed"], 5) << g.dump();
    s.stop();
    // --typical and --top-nsigma too.
    ServerProcess t({server_target_path(), "--typical", "0.5", "--top-nsigma", "2"}, "typical");
    auto tp = t.client().Get("/props");
    ASSERT_TRUE(tp);
    const json tg = json::parse(tp->body)["default_generation_settings"]["params"];
    EXPECT_EQ(tg["typical_p"], 0.5) << tg.dump();
    EXPECT_EQ(tg["top_n_sigma"], 2.0) << tg.dump();
    t.stop();
    EXPECT_THROW(ServerProcess({server_target_path(), "--typical", "1.5"}, "typ"),
                 std::runtime_error);
    // Names vLLM does not have, or fp16 caches: refused naming the flag.
    EXPECT_THROW(ServerProcess({server_target_path(), "--tool-call-parser", "nonesuch"}, "tcp"),
                 std::runtime_error);
    EXPECT_THROW(ServerProcess({server_target_path(), "--reasoning-parser", "nonesuch"}, "rp"),
                 std::runtime_error);
    EXPECT_THROW(ServerProcess({server_target_path(), "--kv-cache-dtype", "int4"}, "kvd"),
                 std::runtime_error);
}

// llama-server's --chat-template: a built-in name or a Jinja template's text; a bad name fails
// before the model loads.
TEST(DropInFlags, ServeChatTemplate) {
    const json convo = {{"messages", user("Hi")}};
    ServerProcess named({"-m", server_target_path(), "--chat-template", "chatml"}, "chatml");
    Reply r = post_json(named, "/apply-template", convo);
    EXPECT_EQ(r.body["prompt"], "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
        << r.text;
    named.stop();
    ServerProcess inline_tmpl({"-m", server_target_path(), "--chat-template",
                               "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
                               "{% if add_generation_prompt %}[assistant] {% endif %}"},
                              "jinja");
    r = post_json(inline_tmpl, "/apply-template", convo);
    EXPECT_EQ(r.body["prompt"], "[user] Hi\n[assistant] ") << r.text;
    inline_tmpl.stop();
    EXPECT_THROW(ServerProcess({"-m", server_target_path(), "--chat-template", "nonesuch"}, "bad"),
                 std::runtime_error);
}

// vLLM's --max-num-batched-tokens: the prompt tokens a step evaluates (at most -ub). Without it a
// lone prompt goes in one pass; with 16, a prompt of over 130 tokens takes 9 passes and more.
// More than -ub is said on stderr and capped.
TEST(DropInFlags, MaxNumBatchedTokensIsTheStepsPromptBudget) {
    {
        ServerProcess s({server_target_path(), "--max-model-len", "512"}, "batched_default");
        Reply r = post_json(s, "/v1/completions", {{"prompt", long_prompt()}, {"max_tokens", 1}});
        ASSERT_EQ(r.status, 200) << r.text;
        ASSERT_GT(r.body["usage"]["prompt_tokens"].get<int>(), 130) << r.text;
        EXPECT_LE(batch_passes(s), 2);
    }
    {
        ServerProcess s(
            {server_target_path(), "--max-model-len", "512", "--max-num-batched-tokens", "16"},
            "batched16");
        Reply r = post_json(s, "/v1/completions", {{"prompt", long_prompt()}, {"max_tokens", 1}});
        ASSERT_EQ(r.status, 200) << r.text;
        EXPECT_GE(batch_passes(s), 9);
    }
    ServerProcess s({server_target_path(), "--max-model-len", "512", "--max-num-batched-tokens",
                     "8192", "-ub", "256"},
                    "batched8192");
    EXPECT_NE(s.log().find("--max-num-batched-tokens 8192 is more than one pass takes (-ub 256)"),
              std::string::npos)
        << s.log();
    Reply r = post_json(s, "/v1/completions", {{"prompt", long_prompt()}, {"max_tokens", 4}});
    EXPECT_EQ(r.status, 200) << r.text;
    EXPECT_THROW(
        ServerProcess({server_target_path(), "--max-num-batched-tokens", "-5"}, "batched_bad"),
        std::runtime_error);
}
