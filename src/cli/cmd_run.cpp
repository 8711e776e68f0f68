// `specula run`: llama-cli style generation. The prompt is tokenized with BOS as the vocabulary
// says and special tokens parsed, evaluated in one batch, and the sampled tokens' pieces stream to
// stdout byte for byte (nothing else goes there). Options are checked and the context budget is
// enforced before any token is generated; logs and the closing statistics line go to stderr.
// With a drafter (-md DRAFT or --spec-type ngram) the same loop decodes speculatively
// (spec/generate.h); the text is the same, only faster, and the acceptance statistics follow.
#include <cstdio>
#include <fstream>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "common/error.h"
#include "kernels/threadpool.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "spec/generate.h"
#include "spec/speculative.h"

namespace specula::cli {

namespace {

void check_options(const RunOptions& o) {
    if (o.n_predict < -1) fail("-n (--n-predict) must be -1 or >= 0, got ", o.n_predict);
    if (o.n_threads < 0) fail("-t (--threads) must be >= 1, got ", o.n_threads);
    if (o.n_threads > max_pool_threads())
        fail("-t (--threads) must be at most ", max_pool_threads(),
             " (4x the hardware threads), got ", o.n_threads);
    if (o.n_ctx < 0) fail("-c (--ctx-size) must be >= 0, got ", o.n_ctx);
    if (o.top_p < 0.f || o.top_p > 1.f) fail("--top-p must be in [0, 1], got ", o.top_p);
    if (o.min_p < 0.f || o.min_p > 1.f) fail("--min-p must be in [0, 1], got ", o.min_p);
    if (!(o.draft_p_min >= 0.f && o.draft_p_min <= 1.f))  // NaN fails too
        fail("--draft-p-min must be in [0, 1], got ", o.draft_p_min);
}

// Prompt tokens as llama-cli makes them; an empty result (a vocabulary that adds no BOS and an
// empty prompt) starts from BOS alone, so there is always something to evaluate.
std::vector<token_id> tokenize_prompt(const Tokenizer& tok, const std::string& text) {
    auto ids = tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
    if (ids.empty()) {
        if (tok.bos() < 0) fail("the prompt is empty and the vocabulary has no BOS token");
        ids.push_back(tok.bos());
    }
    return ids;
}

// Refuses a prompt or a token budget that cannot fit in the context before anything runs.
void check_context(int n_prompt, int n_predict, int n_ctx) {
    if (n_prompt > n_ctx) {
        fail("the prompt is ", n_prompt, " tokens but the context (-c) holds ", n_ctx);
    }
    if (n_predict >= 0 && int64_t(n_prompt) + n_predict > n_ctx) {  // -n 2147483647: no overflow
        fail("prompt (", n_prompt, " tokens) + -n ", n_predict, " exceeds the context (-c) of ",
             n_ctx, " tokens");
    }
}

// Writes token pieces to stdout as they come. llama2.c drops the space that SentencePiece puts
// in front of the first word when generation starts from BOS alone; so do we, for that case only.
class PieceWriter {
  public:
    PieceWriter(const Tokenizer& tok, bool strip_first_space)
        : tok_(tok), strip_first_space_(strip_first_space) {}

    void operator()(token_id id) {
        std::string piece = tok_.token_to_piece(id, /*special=*/false);
        if (first_ && strip_first_space_ && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
        first_ = false;
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
    }

  private:
    const Tokenizer& tok_;
    bool strip_first_space_;
    bool first_ = true;
};

// The KV cache is allocated up front; a context too large for memory is a user error.
std::unique_ptr<Session> make_session(const Model& model, int n_ctx, int n_threads) {
    try {
        return std::make_unique<Session>(model, SessionParams{n_ctx, n_threads});
    } catch (const std::bad_alloc&) {
        fail("out of memory allocating the KV cache for a context of ", n_ctx,
             " tokens (-c); try a smaller -c");
    }
}

void print_stats(const SpecStats& st, int n_prompt, double load_ms) {
    if (st.stop_reason == "context") log("warning: the context is full; generation stopped");
    if (st.n_generated > 0) log("%s", "");  // end the streamed text's line on a terminal
    // The prompt pass covers all prompt tokens but the last (it rides with the first step).
    log("prompt: %d tokens, %.1f tok/s | generated: %d tokens, %.1f tok/s | load: %.0f ms",
        n_prompt, st.prompt_tps(), st.n_generated, st.gen_tps(), load_ms);
    if (log_enabled()) st.print_speculative(stderr);
}

DraftOptions draft_options(const RunOptions& o, int n_ctx, int n_threads) {
    DraftOptions d;
    d.draft_model = o.model_draft;
    d.lookup = o.spec_type == "ngram";
    if (o.spec_type == "draft" && o.model_draft.empty())
        fail("--spec-type draft needs a draft model (-md FILE)");
    if (d.lookup && !o.model_draft.empty())
        fail("--spec-type ngram drafts without a model: drop -md, or use --spec-type draft");
    if (o.ngram_min < 1 || o.ngram_max < o.ngram_min)
        fail("--spec-ngram-min/max must satisfy 1 <= min <= max, got ", o.ngram_min, "/",
             o.ngram_max);
    if (o.draft_min < 0) fail("--draft-min must be >= 0, got ", o.draft_min);
    d.ngram.ngram_min = o.ngram_min;
    d.ngram.ngram_max = o.ngram_max;
    d.p_min = o.draft_p_min;
    d.n_ctx = n_ctx;  // the draft follows the target through the whole context
    d.n_threads = n_threads;
    return d;
}

void write_stats_json(const std::string& path, const SpecStats& st) {
    std::ofstream f(path);
    if (!f) fail("cannot write --stats-json file ", path);
    f << st.to_json().dump(2) << "\n";
    if (!f) fail("error writing --stats-json file ", path);
}

}  // namespace

int cmd_run(const RunOptions& opt) {
    check_options(opt);
    if (opt.n_gpu_layers > 0) {
        log("warning: -ngl %d ignored: specula has no GPU backend, running on the CPU",
            opt.n_gpu_layers);
    }
    const std::string prompt_text = resolve_prompt(opt.prompt, opt.prompt_file);

    Timer load_timer;
    auto model = Model::load(opt.model);
    const double load_ms = load_timer.ms();
    const Tokenizer& tok = model->tokenizer();
    const auto prompt = tokenize_prompt(tok, prompt_text);

    const int n_ctx_train = model->hparams().n_ctx_train;
    const int n_ctx = opt.n_ctx > 0 ? opt.n_ctx : n_ctx_train;
    if (opt.n_ctx > n_ctx_train && n_ctx_train > 0) {
        log("warning: -c %d is larger than the model's training context (%d)", opt.n_ctx,
            n_ctx_train);
    }
    check_context(static_cast<int>(prompt.size()), opt.n_predict, n_ctx);

    const int n_threads =
        opt.n_threads > 0 ? opt.n_threads : static_cast<int>(std::thread::hardware_concurrency());
    auto session = make_session(*model, n_ctx, n_threads);
    Sampler sampler(SamplingParams{opt.temp, opt.top_k, opt.top_p, opt.min_p, opt.seed});
    log("model: %s | n_ctx: %d | threads: %d | seed: %llu", model->describe().c_str(), n_ctx,
        n_threads, static_cast<unsigned long long>(sampler.seed()));

    const SamplingParams sparams = sampler.params();
    SpeculativeSetup spec = make_drafter(*model, draft_options(opt, n_ctx, n_threads), sparams);
    GenParams gp;
    gp.n_predict = opt.n_predict;
    gp.ignore_eos = opt.ignore_eos;
    gp.draft_min = opt.draft_min;
    parse_draft_length(opt.draft, gp);
    if (spec.drafter) {
        log("speculative: %s, draft %s", spec.drafter->name(), opt.draft.c_str());
    }

    const bool bos_only = prompt.size() == 1 && prompt[0] == tok.bos();
    PieceWriter writer(tok, tok.model() == "llama" && bos_only);
    Generator gen(*session, sampler, spec.drafter.get(), gp);
    const SpecStats st = gen.generate(prompt, [&](token_id id) {
        writer(id);
        return true;
    });
    print_stats(st, static_cast<int>(prompt.size()), load_ms);
    if (!opt.stats_json.empty()) write_stats_json(opt.stats_json, st);
    return 0;
}

}  // namespace specula::cli
