// The draft trace (speculative/draft_trace.h): with n-gram lookup, whose proposals are a pure
// function of the history, every traced step's drafted ids are exactly what a fresh NgramDrafter
// proposes for the history before that step; with a draft model, the accepted prefix of each step
// is the tokens the generation emitted there and the next drafted token is not (greedy). For both,
// the accepted counts sum to the statistics', the positions follow from the accepted counts, and
// tracing changes no output. write_draft_trace writes one parseable JSON line per step and names
// a file it cannot write.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/session.h"
#include "speculative/draft_trace.h"
#include "speculative/drafters/draft_model_drafter.h"
#include "speculative/drafters/ngram_drafter.h"
#include "speculative/generator.h"
#include "test_util.h"

using namespace specula;
using json = nlohmann::json;

namespace {

SessionParams one_thread() {
    SessionParams p;
    p.n_threads = 1;
    return p;
}
const SessionParams kOneThread = one_thread();

struct Traced {
    std::vector<token_id> output;
    SpecStats stats;
};

Traced generate(Session& target, Drafter* drafter, std::span<const token_id> prompt, bool trace,
                int n_draft = 4) {
    SamplingParams sp;
    sp.temp = 0.f;
    Sampler sampler(sp);
    GenParams gp;
    gp.n_predict = 80;
    gp.ignore_eos = true;
    gp.n_draft = n_draft;
    gp.trace = trace;
    Traced t;
    t.output = generate_tokens(target, sampler, drafter, prompt, gp, &t.stats);
    return t;
}

// What every trace shows whatever the drafter: steps numbered from 0, one per target pass,
// positions advancing by the accepted drafts plus the target's own token, sums equal to the
// statistics', and accepted drafts equal to the emitted tokens.
void check_consistent(const Traced& t, size_t n_prompt) {
    const auto& tr = t.stats.trace;
    ASSERT_EQ(int(tr.size()), t.stats.n_target_passes);
    long drafted = 0, accepted = 0;
    int pos = int(n_prompt);
    for (size_t i = 0; i < tr.size(); ++i) {
        EXPECT_EQ(tr[i].step, int(i));
        EXPECT_EQ(tr[i].pos, pos) << "step " << i;
        EXPECT_LE(tr[i].accepted, int(tr[i].drafted.size()));
        for (int j = 0; j < tr[i].accepted; ++j)
            EXPECT_EQ(tr[i].drafted[size_t(j)], t.output[size_t(pos) - n_prompt + size_t(j)]);
        // Greedy: a rejected draft token is not the token the target emitted in its place.
        if (tr[i].accepted < int(tr[i].drafted.size()) &&
            size_t(pos) - n_prompt + size_t(tr[i].accepted) < t.output.size())
            EXPECT_NE(tr[i].drafted[size_t(tr[i].accepted)],
                      t.output[size_t(pos) - n_prompt + size_t(tr[i].accepted)]);
        drafted += long(tr[i].drafted.size());
        accepted += tr[i].accepted;
        pos += tr[i].accepted + 1;
    }
    EXPECT_EQ(drafted, t.stats.n_drafted);
    EXPECT_EQ(accepted, t.stats.n_accepted);
    EXPECT_GT(accepted, 0);
}

std::vector<token_id> story_prompt(const Model& m) {
    return m.tokenizer().encode(
        "Once upon a time, there was a little girl named Lily. She liked to play. Once upon a "
        "time, there was a little",
        /*add_special=*/true, /*parse_special=*/false);
}

}  // namespace

TEST(DraftTrace, NgramStepsAreTheDrafterProposals) {
    auto target = Model::load(test::shared_path("models/tinystories/stories260K.gguf"));
    Session session(*target, kOneThread);
    const std::vector<token_id> prompt = story_prompt(*target);
    NgramDrafter drafter(NgramParams{2, 4});
    const Traced plain = generate(session, &drafter, prompt, /*trace=*/false);
    const Traced t = generate(session, &drafter, prompt, /*trace=*/true);
    EXPECT_EQ(t.output, plain.output) << "tracing changes the output";
    EXPECT_TRUE(plain.stats.trace.empty());
    check_consistent(t, prompt.size());
    std::vector<token_id> history = prompt;
    history.insert(history.end(), t.output.begin(), t.output.end());
    NgramDrafter fresh(NgramParams{2, 4});
    for (const DraftTraceStep& s : t.stats.trace) {
        Draft d;
        const int n_max = std::min(4, 80 - (s.pos - int(prompt.size())) - 1);
        fresh.propose(std::span(history).first(size_t(s.pos)), std::max(n_max, 0), d);
        EXPECT_EQ(s.drafted, d.tokens) << "step " << s.step;
    }
}

TEST(DraftTrace, DraftModelAcceptedPrefixIsTheOutput) {
    auto target = Model::load(test::shared_path("models/tinystories/stories260K.gguf"));
    auto draft = Model::load(test::shared_path("models/tinystories/llama2xs.gguf"));
    Session session(*target, kOneThread);
    DraftModelParams dp;
    dp.n_threads = 1;
    dp.sampling.temp = 0.f;
    DraftModelDrafter drafter(*draft, dp);
    const std::vector<token_id> prompt = story_prompt(*target);
    const Traced t = generate(session, &drafter, prompt, /*trace=*/true, 3);
    check_consistent(t, prompt.size());
    for (const DraftTraceStep& s : t.stats.trace) EXPECT_LE(s.drafted.size(), 3u);
}

TEST(DraftTrace, JsonLinesRoundTrip) {
    const std::vector<DraftTraceStep> trace = {
        {0, 7, {5, 6, 7}, 2, 0}, {1, 10, {}, 0, 0}, {2, 11, {9, 1}, 1, 1}};
    const std::string dir = test::temp_dir("draft-trace");
    const std::string path = dir + "/trace.jsonl";
    write_draft_trace(path, trace, "ngram");
    std::ifstream f(path);
    std::string line;
    std::vector<json> lines;
    while (std::getline(f, line)) lines.push_back(json::parse(line));
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_EQ(lines[0], json::parse(R"({"step":0,"pos":7,"drafter":"ngram","drafted":[5,6,7],
                                        "accepted":2})"));
    EXPECT_EQ(lines[1]["drafted"], json::array());
    EXPECT_EQ(lines[2]["forced"], 1);
    EXPECT_FALSE(lines[0].contains("forced"));
    try {
        write_draft_trace(dir + "/no/such/dir/t.jsonl", trace, "ngram");
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(dir + "/no/such/dir/t.jsonl"), std::string::npos)
            << e.what();
    }
    std::filesystem::remove_all(dir);
}
