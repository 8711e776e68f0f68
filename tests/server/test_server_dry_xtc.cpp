// llama-server's DRY fields (sampling/dry.h) in `specula serve`: a greedy request with
// dry_multiplier gives the bytes `specula run` gives with the same --dry-* flags (the prompt
// counts in DRY's history in both), also through the server's draft model; custom
// dry_sequence_breakers match --dry-sequence-breaker; samplers must list dry first when it is
// on; bad values are 400 naming the field; --dry-* launch flags become every request's default
// and /props reports them. XTC's fields likewise: sampled output changes, samplers must list xtc
// before temperature when it is on, bad values are 400s.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_checks.h"
#include "cli_process.h"
#include "server_process.h"

using nlohmann::json;
using namespace specula::test;

namespace {

const char* kPrompt = "Once upon a time, there was a";
constexpr int kTokens = 96;

// `specula run`'s greedy continuation of kPrompt with `flags`.
std::string cli_text(const std::string& model, std::vector<std::string> flags) {
    std::vector<std::string> args{
        "run",    "-m", model,         "-p", kPrompt, "-n", std::to_string(kTokens),
        "--temp", "0",  "--ignore-eos"};
    args.insert(args.end(), flags.begin(), flags.end());
    const ProcResult r = run_specula(args);
    EXPECT_EQ(r.status, 0) << describe(r);
    return r.out;
}

JsonReply complete(const ServerProcess& s, json extra) {
    json body = {
        {"prompt", kPrompt}, {"n_predict", kTokens}, {"temperature", 0}, {"ignore_eos", true}};
    body.update(extra);
    return post_json(s, "/completion", body);
}

const json kDry = {{"dry_multiplier", 1.5}, {"dry_base", 1.75}, {"dry_allowed_length", 2}};
const std::vector<std::string> kDryFlags = {"--dry-multiplier",     "1.5", "--dry-base", "1.75",
                                            "--dry-allowed-length", "2"};

// Each request (extra fields over complete()'s) is a 400 naming `param`.
struct Bad {
    json fields;
    const char* param;
};
void expect_refused(const ServerProcess& s, const std::vector<Bad>& bad) {
    for (const Bad& b : bad) {
        const JsonReply r = complete(s, b.fields);
        EXPECT_EQ(r.status, 400) << b.fields.dump() << ": " << r.text;
        EXPECT_EQ(r.body["error"]["param"], b.param) << b.fields.dump() << ": " << r.text;
    }
}

}  // namespace

TEST(ServerDry, RequestsMatchTheCliAlsoWithADraftModel) {
    // llama2xs as the target and stories260K as its draft: the bigger one verifies.
    ServerProcess s({"-m", server_draft_path(), "-md", server_target_path(), "--draft", "4"},
                    "dry");
    const std::string cli_plain = cli_text(server_draft_path(), {});
    const std::string cli_dry = cli_text(server_draft_path(), kDryFlags);
    ASSERT_NE(cli_dry, cli_plain);
    const JsonReply plain = complete(s, json::object());
    ASSERT_EQ(plain.status, 200) << plain.text;
    EXPECT_EQ(plain.body["content"], cli_plain);
    const JsonReply dry = complete(s, kDry);
    ASSERT_EQ(dry.status, 200) << dry.text;
    EXPECT_EQ(dry.body["content"], cli_dry);
    EXPECT_EQ(dry.body["generation_settings"]["dry_multiplier"], 1.5) << dry.text;
    // Breakers: the request's list replaces the defaults, as --dry-sequence-breaker does.
    const JsonReply br =
        complete(s, {{"dry_multiplier", 1.5}, {"dry_sequence_breakers", json::array({"."})}});
    ASSERT_EQ(br.status, 200) << br.text;
    EXPECT_EQ(br.body["content"], cli_text(server_draft_path(), {"--dry-multiplier", "1.5",
                                                                 "--dry-sequence-breaker", "."}));
    // llama-server's samplers: dry first is Specula's order; leaving it out while it is on is not.
    JsonReply ok = complete(s, {{"dry_multiplier", 1.5}, {"samplers", "dkypmt"}});
    EXPECT_EQ(ok.status, 200) << ok.text;
    EXPECT_EQ(ok.body["content"], cli_text(server_draft_path(), {"--dry-multiplier", "1.5"}));
    expect_refused(
        s, {
               {{{"dry_multiplier", 1.5}, {"samplers", "kypmt"}}, "samplers"},
               {{{"dry_multiplier", 1.5}, {"samplers", "kdypmt"}}, "samplers"},
               {{{"dry_multiplier", 1.5}, {"dry_base", 0.5}}, "dry_base"},
               {{{"dry_multiplier", -1}}, "dry_multiplier"},
               {{{"dry_multiplier", "1"}}, "dry_multiplier"},
               {{{"dry_allowed_length", -1}}, "dry_allowed_length"},
               {{{"dry_penalty_last_n", -2}}, "dry_penalty_last_n"},
               {{{"dry_sequence_breakers", json::array()}}, "dry_sequence_breakers"},
               {{{"dry_sequence_breakers", "\n"}}, "dry_sequence_breakers"},
               {{{"dry_sequence_breakers", json::array({"a", ""})}}, "dry_sequence_breakers"},
           });
    // DRY off at a base llama.cpp would take as off: accepted, the plain text.
    const JsonReply off = complete(s, {{"dry_base", 0.5}});
    ASSERT_EQ(off.status, 200) << off.text;
    EXPECT_EQ(off.body["content"], cli_plain);
    // The server still serves after the refusals.
    EXPECT_EQ(complete(s, kDry).body["content"], cli_dry);
}

TEST(ServerDry, LaunchFlagsAreEveryRequestsDefault) {
    ServerProcess s({"-m", server_draft_path(), "--dry-multiplier", "1.5", "--dry-base", "1.75",
                     "--dry-allowed-length", "2", "--dry-sequence-breaker", "\\n"},
                    "dryflags");
    auto props = s.client().Get("/props");
    ASSERT_TRUE(props);
    const json g = json::parse(props->body)["default_generation_settings"]["params"];
    EXPECT_EQ(g["dry_multiplier"], 1.5) << g.dump();
    EXPECT_EQ(g["dry_allowed_length"], 2) << g.dump();
    EXPECT_EQ(g["dry_sequence_breakers"], json::array({"\n"})) << g.dump();
    const JsonReply r = complete(s, json::object());
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["content"], cli_text(server_draft_path(), {"--dry-multiplier", "1.5",
                                                                "--dry-sequence-breaker", "\\n"}));
    // A request's own field wins.
    const JsonReply off = complete(s, {{"dry_multiplier", 0}});
    EXPECT_EQ(off.body["content"], cli_text(server_draft_path(), {}));
}

TEST(ServerXtc, FieldsSampleAndAreChecked) {
    ServerProcess s({"-m", server_draft_path(), "--xtc-threshold", "0.05"}, "xtc");
    const json sampled = {{"temperature", 1.0}, {"seed", 5},  {"top_k", 0},
                          {"top_p", 1},         {"min_p", 0}, {"n_predict", 48}};
    const JsonReply base = complete(s, sampled);
    ASSERT_EQ(base.status, 200) << base.text;
    json with = sampled;
    with["xtc_probability"] = 1.0;  // the launch flag's threshold
    const JsonReply xtc = complete(s, with);
    ASSERT_EQ(xtc.status, 200) << xtc.text;
    EXPECT_NE(xtc.body["content"], base.body["content"]);
    EXPECT_EQ(complete(s, with).body["content"], xtc.body["content"]);  // the seed reproduces
    EXPECT_EQ(xtc.body["generation_settings"]["xtc_threshold"].get<double>(), double(0.05f));
    with["samplers"] = "edkypmxt";
    EXPECT_EQ(complete(s, with).body["content"], xtc.body["content"]);
    expect_refused(s, {
                          {{{"xtc_probability", 0.5}, {"samplers", "kypmt"}}, "samplers"},
                          {{{"xtc_probability", 0.5}, {"samplers", "xkypmt"}}, "samplers"},
                          {{{"xtc_probability", 1.5}}, "xtc_probability"},
                          {{{"xtc_threshold", -1}}, "xtc_threshold"},
                          {{{"xtc_probability", "0.5"}}, "xtc_probability"},
                      });
    auto props = s.client().Get("/props");
    ASSERT_TRUE(props);
    const json g = json::parse(props->body)["default_generation_settings"]["params"];
    EXPECT_EQ(g["xtc_threshold"].get<double>(), double(0.05f)) << g.dump();
    EXPECT_EQ(g["xtc_probability"], 0.0) << g.dump();
}
