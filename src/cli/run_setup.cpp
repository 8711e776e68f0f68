// check_run_options / load_target / make_run_setup / PieceWriter: see run_setup.h.
#include "cli/run_setup.h"

#include <cmath>
#include <cstdio>
#include <new>

#include "cli/cli_util.h"
#include "common/error.h"
#include "common/threadpool.h"
#include "model/memory_plan.h"
#include "tokenizer/prompt.h"

namespace specula::cli {

namespace {

// The KV cache is allocated up front; a context too large for memory is a user error.
std::unique_ptr<Session> make_session(const Model& model, const SessionParams& sp) {
    const int n_ctx = sp.n_ctx;
    try {
        return std::make_unique<Session>(model, sp);
    } catch (const std::bad_alloc&) {
        fail("out of memory allocating the KV cache for a context of ", n_ctx,
             " tokens (-c); try a smaller -c");
    }
}

// The penalties and logit bias of --repeat-penalty ... --logit-bias.
PenaltyParams penalty_params(const RunOptions& o) {
    PenaltyParams p = o.penalties;
    for (const std::string& b : o.logit_bias) parse_logit_bias(b, p.logit_bias);
    return p;
}

// The target's constraints; Error names a bad value.
std::unique_ptr<Constraints> make_constraints(const PenaltyParams& p, int n_vocab) {
    try {
        return std::make_unique<Constraints>(p, n_vocab);
    } catch (const Error& e) {
        // The field names are the server's (repeat_penalty); say the flag as the user typed it.
        std::string msg = e.what();
        for (char& c : msg)
            if (c == '_') c = '-';
        fail("--", msg);
    }
}

}  // namespace

void check_run_options(const RunOptions& o) {
    if (o.n_predict < -1) fail("-n (--n-predict) must be -1 or >= 0, got ", o.n_predict);
    if (o.n_threads < 0) fail("-t (--threads) must be >= 1, got ", o.n_threads);
    if (o.n_threads > max_pool_threads())
        fail("-t (--threads) must be at most ", max_pool_threads(),
             " (4x the hardware threads), got ", o.n_threads);
    if (o.n_ctx < 0) fail("-c (--ctx-size) must be >= 0, got ", o.n_ctx);
    // Written so that NaN fails too.
    if (!std::isfinite(o.temp)) fail("--temp must be a finite number, got ", o.temp);
    if (!(o.top_p >= 0.f && o.top_p <= 1.f)) fail("--top-p must be in [0, 1], got ", o.top_p);
    if (!(o.min_p >= 0.f && o.min_p <= 1.f)) fail("--min-p must be in [0, 1], got ", o.min_p);
}

std::string prompt_text(const RunOptions& o) {
    const std::string text = resolve_prompt(o.prompt, o.prompt_file);
    return o.escape ? process_escapes(text) : text;
}

std::vector<std::string> reverse_prompts(const RunOptions& o) {
    std::vector<std::string> out;
    for (const std::string& r : o.reverse_prompts) {
        if (r.empty()) fail("-r (--reverse-prompt) must not be empty");
        out.push_back(o.escape ? process_escapes(r) : r);
    }
    return out;
}

LoadedTarget load_target(const RunOptions& o) {
    LoadedTarget t;
    t.mem_available = mem_available_bytes();  // before the models take their share
    Timer load_timer;
    // An MTP sidecar (--spec-type mtp -md FILE) is part of the target's load.
    const std::string sidecar = mtp_sidecar(parse_speculative_flags(o.spec));
    t.model = Model::load(o.model, LoadOptions{.n_threads = default_threads(o.n_threads),
                                               .gpu = o.placement.target,
                                               .mtp_sidecar = sidecar});
    t.load_ms = load_timer.ms();
    const int n_ctx_train = t.model->hparams().n_ctx_train;
    t.n_ctx = o.n_ctx > 0 ? o.n_ctx : n_ctx_train;
    if (o.n_ctx > n_ctx_train && n_ctx_train > 0)
        log("warning: -c %d is larger than the model's training context (%d)", o.n_ctx,
            n_ctx_train);
    return t;
}

std::unique_ptr<RunSetup> make_run_setup(const RunOptions& o, const LoadedTarget& t) {
    auto e = std::make_unique<RunSetup>();
    const Model& model = *t.model;
    e->spec = parse_speculative_flags(o.spec);
    e->spec.draft_gpu = o.placement.draft;
    const PenaltyParams penalties = penalty_params(o);
    e->constraints = make_constraints(penalties, model.hparams().n_vocab);
    e->n_threads = default_threads(o.n_threads);
    const KVType type_k = parse_kv_type(o.cache_type_k, "-ctk (--cache-type-k)");
    const KVType type_v = parse_kv_type(o.cache_type_v, "-ctv (--cache-type-v)");
    // Both models are loaded (mapped) before any cache is allocated: the plan sees them all.
    e->setup = load_speculative(e->spec, model);
    const MemoryPlan plan =
        plan_memory(model, e->setup.draft_model.get(),
                    CachePlan{t.n_ctx, e->n_threads, type_k, type_v, 1,
                              SessionParams::kDefaultUbatch, max_verify_rows(e->spec)},
                    t.mem_available);
    log("%s", describe(plan).c_str());
    check_memory(plan);
    e->session = make_session(model, SessionParams{t.n_ctx, e->n_threads, type_k, type_v});
    e->sampler =
        std::make_unique<Sampler>(SamplingParams{o.temp, o.top_k, o.top_p, o.min_p, o.seed});
    log("model: %s | n_ctx: %d | kv cache: k %s, v %s | threads: %d | seed: %llu",
        model.describe().c_str(), t.n_ctx, kv_type_name(type_k), kv_type_name(type_v), e->n_threads,
        static_cast<unsigned long long>(e->sampler->seed()));

    // The draft follows the target through the whole context.
    e->drafter = make_drafter(
        e->setup, DrafterParams{t.n_ctx, e->n_threads, e->sampler->params(), type_k, type_v});
    e->gen.n_predict = o.n_predict;
    e->gen.ignore_eos = o.ignore_eos;
    e->gen.n_draft = e->spec.n_draft;
    e->gen.draft_min = e->spec.draft_min;
    e->gen.n_forced = e->spec.n_forced;
    if (e->drafter)
        log("speculative: %s%s, draft %s", e->drafter->name(),
            model.mtp_file() ? (" (head from " + model.mtp_path() + ")").c_str() : "",
            draft_length_name(e->spec).c_str());
    return e;
}

Generator RunSetup::make_generator() {
    return Generator(*session, *sampler, drafter.get(), gen,
                     spec.draft_auto ? &auto_length : nullptr, constraints.get());
}

bool PieceWriter::operator()(token_id id) {
    std::string piece = tok_.token_to_piece(id, special_);
    if (first_ && strip_first_space_ && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    first_ = false;
    const size_t before = text_.size();
    text_ += piece;
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    for (const std::string& s : stops_) {
        // Only where this piece can have completed it.
        const size_t from = before >= s.size() ? before - s.size() + 1 : 0;
        if (!s.empty() && text_.find(s, from) != std::string::npos) return false;
    }
    return true;
}

}  // namespace specula::cli
