// Engine: see engine.h.
#include "server/engine.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "common/error.h"
#include "frontend/prompt.h"
#include "server/api_error.h"
#include "speculative/generator.h"

namespace specula {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

std::string default_name(const std::string& path) {
    std::string stem = std::filesystem::path(path).filename().string();
    if (stem.size() > 5 && stem.ends_with(".gguf")) stem.resize(stem.size() - 5);
    return stem;
}

}  // namespace

Engine::Engine(const EngineConfig& cfg) : cfg_(cfg) {
    if (cfg.n_parallel < 1) fail("--parallel must be >= 1, got ", cfg.n_parallel);
    if (cfg.speculative.n_draft < 0)
        fail("--draft must be >= 0 or auto, got ", cfg.speculative.n_draft);

    target_ = Model::load(cfg.model_path);
    spec_ = load_speculative(cfg.speculative, *target_, cfg.model_path);
    served_name_ = cfg.served_name.empty() ? default_name(cfg.model_path) : cfg.served_name;

    const std::string tmpl = target_->file().get_string_or("tokenizer.chat_template", "");
    chat_format_ = detect_chat_format(tmpl);
    if (chat_format_ == ChatFormat::Plain) {
        std::fprintf(stderr, "serve: %s; chat uses the default \"User: ...\\nAssistant:\" format\n",
                     tmpl.empty() ? "the model has no tokenizer.chat_template"
                                  : "the model's chat template is not recognised");
    }

    const int n_ctx_train = target_->hparams().n_ctx_train;
    n_ctx_ = cfg.n_ctx > 0 ? cfg.n_ctx
                           : std::min(n_ctx_train > 0 ? n_ctx_train : SessionParams::kDefaultMaxCtx,
                                      SessionParams::kDefaultMaxCtx);
    n_threads_slot_ = std::max(1, default_threads(cfg.n_threads) / cfg.n_parallel);
    slots_ = std::make_unique<SlotPool>(*target_, cfg.n_parallel, n_ctx_, n_threads_slot_);
}

Engine::~Engine() = default;

std::string Engine::describe() const {
    std::string s = served_name_ + " (" + target_->describe() + ") | ctx " +
                    std::to_string(n_ctx_) + " | slots " + std::to_string(slots_->size()) + " x " +
                    std::to_string(n_threads_slot_) + " threads | chat " +
                    chat_format_name(chat_format_);
    const SpeculativeConfig& sc = cfg_.speculative;
    if (sc.method == SpecMethod::none) return s + " | speculative: off";
    s += std::string(" | speculative: ") + method_name(sc.method);
    if (spec_.draft_model) s += " (" + default_name(sc.draft_model) + ")";
    return s + ", draft " + draft_length_name(sc);
}

std::vector<token_id> Engine::tokenize(const std::string& text) const {
    try {
        return tokenize_prompt(target_->tokenizer(), text);
    } catch (const Error& e) {
        bad_request(e.what(), "prompt");
    }
}

PreparedRequest Engine::prepare(CompletionRequest req) const {
    PreparedRequest p;
    p.t_arrival = clock_type::now();
    if (!req.model.empty() && req.model != served_name_) {  // never the path: no path oracle
        throw ApiError(404,
                       "the model '" + req.model + "' does not exist (this server serves '" +
                           served_name_ + "')",
                       "model", "invalid_request_error", "model_not_found");
    }
    const char* prompt_param = req.chat ? "messages" : "prompt";
    // A prompt too long by its bytes alone is refused before it is tokenized.
    const auto refuse_by_bytes = [&](const std::string& text) -> const std::string& {
        const ContextFit fit = check_prompt_bytes(target_->tokenizer(), text.size(), n_ctx_, "");
        if (fit.what != ContextFit::fits) bad_request(fit.message, prompt_param);
        return text;
    };
    if (req.chat) {
        p.prompt = tokenize(refuse_by_bytes(render_chat(chat_format_, req.messages, true)));
    } else if (!req.prompt_ids.empty()) {
        const int nv = target_->hparams().n_vocab;
        for (token_id t : req.prompt_ids)
            if (t < 0 || t >= nv)
                bad_request("prompt token id " + std::to_string(t) +
                                " is outside the vocabulary (" + std::to_string(nv) + " tokens)",
                            "prompt");
        p.prompt = req.prompt_ids;
    } else {
        p.prompt = tokenize(refuse_by_bytes(req.prompt));
    }
    const ContextFit fit =
        check_context(int(p.prompt.size()), req.max_tokens, n_ctx_, "", "max_tokens");
    if (fit.what != ContextFit::fits)
        bad_request(fit.message,
                    fit.what == ContextFit::prompt_too_long ? prompt_param : "max_tokens");
    p.n_predict = req.max_tokens;
    p.req = std::move(req);
    return p;
}

// A request whose client left while it waited for a slot: counted as aborted, nothing generated.
Completion Engine::abandoned_in_queue(const PreparedRequest& p) {
    Completion c;
    c.finish_reason = "abort";
    c.stats.n_prompt = int(p.prompt.size());
    c.stats.stop_reason = "callback";
    c.e2e_s = seconds_since(p.t_arrival);
    metrics_.record_request(c.stats, c.finish_reason, c.e2e_s, 0);
    std::fprintf(stderr, "serve: a queued request was abandoned by its client\n");
    return c;
}

// Greedy drafting does not depend on the request, so greedy requests share the slot's drafter
// (its draft Session is allocated once); a sampling request gets a fresh one whose draws follow
// the request's seed. N-gram drafting is deterministic: always the slot's.
Drafter* Engine::drafter_for(Slot& slot, const SamplingParams& sp,
                             std::unique_ptr<Drafter>& own) const {
    const SpecMethod method = cfg_.speculative.method;
    if (method == SpecMethod::none) return nullptr;
    if (sp.temp <= 0.f || method == SpecMethod::ngram) {
        if (!slot.drafter)
            slot.drafter = make_drafter(
                spec_, DrafterParams{n_ctx_, n_threads_slot_, SamplingParams{0.f, 0, 1.f, 0.f, 0}});
        return slot.drafter.get();
    }
    own = make_drafter(spec_, DrafterParams{n_ctx_, n_threads_slot_, sp});
    return own.get();
}

Completion Engine::run(const PreparedRequest& p, const PieceSink& sink,
                       const std::function<bool()>& keep_waiting) {
    const CompletionRequest& r = p.req;
    metrics_.add_waiting(1);
    auto lease = slots_->acquire(keep_waiting);
    metrics_.add_waiting(-1);
    if (!lease) return abandoned_in_queue(p);
    Slot& slot = **lease;
    metrics_.add_running(1);
    struct RunningGuard {
        Metrics& m;
        ~RunningGuard() { m.add_running(-1); }
    } running{metrics_};

    SamplingParams sp{r.temperature, r.top_k, r.top_p, r.min_p, r.seed};
    Sampler sampler(sp);
    std::unique_ptr<Drafter> own_drafter;
    Drafter* drafter = drafter_for(slot, sp, own_drafter);

    GenParams gp;
    gp.n_predict = p.n_predict;
    gp.ignore_eos = r.ignore_eos;
    gp.n_draft = r.n_draft.value_or(cfg_.speculative.n_draft);
    gp.draft_min = cfg_.speculative.draft_min;
    // --draft auto, unless the request sets its own length: the slot's controller learns on.
    const bool automatic = cfg_.speculative.draft_auto && !r.n_draft;
    Generator gen(*slot.target, sampler, drafter, gp, automatic ? &slot.draft_length : nullptr);

    Completion c;
    const Tokenizer& tok = target_->tokenizer();
    TextStream text(r.stop);
    bool cancelled = false;
    auto send = [&](std::vector<TokenPiece> pieces) {
        for (const auto& piece : pieces) c.text += piece.text;
        if (!cancelled && !pieces.empty() && !sink(pieces)) cancelled = true;
        return !cancelled;
    };
    c.stats = gen.generate(p.prompt, [&](token_id id, bool drafted) {
        if (c.ttft_s == 0) c.ttft_s = seconds_since(p.t_arrival);
        const bool stop = text.push(tok.token_to_piece(id, /*special=*/false), drafted);
        return send(text.take()) && !stop;
    });
    if (!cancelled) send(text.finish());

    if (cancelled) {
        c.finish_reason = "abort";
    } else if (text.stopped() || c.stats.stop_reason == "eog") {
        c.finish_reason = "stop";
    } else {
        c.finish_reason = "length";
    }
    c.e2e_s = seconds_since(p.t_arrival);
    metrics_.record_request(c.stats, c.finish_reason, c.e2e_s, c.ttft_s);
    std::fprintf(stderr,
                 "serve: slot %d | prompt %d | generated %d (%s) | %.1f tok/s | drafted %ld, "
                 "accepted %ld | %.0f ms\n",
                 slot.id, c.stats.n_prompt, c.stats.n_generated, c.finish_reason.c_str(),
                 c.stats.gen_tps(), c.stats.n_drafted, c.stats.n_accepted, c.e2e_s * 1e3);
    return c;
}

}  // namespace specula
