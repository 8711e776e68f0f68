// Engine: see engine.h.
#include "server/engine.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "common/error.h"
#include "server/api_error.h"
#include "spec/draft_model_drafter.h"
#include "spec/generate.h"
#include "spec/ngram_drafter.h"
#include "spec/vocab_check.h"

namespace specula {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Wraps the real drafter to learn which emitted tokens were accepted drafts: the Generator calls
// accept(n_kept) right before it emits those n_kept draft tokens and then the target's own token.
class TrackingDrafter final : public Drafter {
  public:
    explicit TrackingDrafter(Drafter& inner) : inner_(inner) {}
    const char* name() const override { return inner_.name(); }
    void begin(std::span<const token_id> prompt) override {
        n_drafted_pending_ = 0;
        inner_.begin(prompt);
    }
    int propose(std::span<const token_id> history, int n_max, Draft& out) override {
        return inner_.propose(history, n_max, out);
    }
    void accept(int n_kept) override {
        n_drafted_pending_ = n_kept;
        inner_.accept(n_kept);
    }
    // Called once per emitted token, in order.
    bool next_is_drafted() {
        if (n_drafted_pending_ <= 0) return false;
        --n_drafted_pending_;
        return true;
    }

  private:
    Drafter& inner_;
    int n_drafted_pending_ = 0;
};

std::string default_name(const std::string& path) {
    std::string stem = std::filesystem::path(path).filename().string();
    if (stem.size() > 5 && stem.ends_with(".gguf")) stem.resize(stem.size() - 5);
    return stem;
}

}  // namespace

Engine::Engine(const EngineConfig& cfg) : cfg_(cfg) {
    if (cfg.n_parallel < 1) fail("--parallel must be >= 1, got ", cfg.n_parallel);
    if (cfg.n_draft < 0) fail("--draft must be >= 0 or auto, got ", cfg.n_draft);
    if (cfg.spec_type == "draft_model" && cfg.draft_path.empty())
        fail("speculative method draft_model needs a draft model (-md / --speculative-model)");
    if (!cfg.spec_type.empty() && cfg.spec_type != "draft_model" && cfg.spec_type != "ngram")
        fail("unknown speculative method '", cfg.spec_type, "' (draft_model or ngram)");

    target_ = Model::load(cfg.model_path);
    if (cfg.spec_type == "draft_model") {
        draft_ = Model::load(cfg.draft_path);
        check_vocab_compatible(target_->tokenizer(), draft_->tokenizer(), cfg.model_path,
                               cfg.draft_path);
    }
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
    const int hw = std::max(1, int(std::thread::hardware_concurrency()));
    const int threads = cfg.n_threads > 0 ? cfg.n_threads : hw;
    n_threads_slot_ = std::max(1, threads / cfg.n_parallel);
    slots_ = std::make_unique<SlotPool>(*target_, cfg.n_parallel, n_ctx_, n_threads_slot_);
}

Engine::~Engine() = default;

std::string Engine::describe() const {
    std::string s = served_name_ + " (" + target_->describe() + ") | ctx " +
                    std::to_string(n_ctx_) + " | slots " + std::to_string(slots_->size()) + " x " +
                    std::to_string(n_threads_slot_) + " threads | chat " +
                    chat_format_name(chat_format_);
    if (cfg_.spec_type.empty()) return s + " | speculative: off";
    s += " | speculative: " + cfg_.spec_type;
    if (draft_) s += " (" + default_name(cfg_.draft_path) + ")";
    return s + ", draft " + (cfg_.draft_auto ? std::string("auto") : std::to_string(cfg_.n_draft));
}

std::vector<token_id> Engine::tokenize(const std::string& text) const {
    const Tokenizer& tok = target_->tokenizer();
    auto ids = tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
    if (ids.empty()) {
        if (tok.bos() < 0)
            bad_request("the prompt is empty and the vocabulary has no BOS token", "prompt");
        ids.push_back(tok.bos());
    }
    return ids;
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
    if (req.chat) {
        p.prompt = tokenize(render_chat(chat_format_, req.messages, true));
    } else if (!req.prompt_ids.empty()) {
        const int nv = target_->hparams().n_vocab;
        for (token_id t : req.prompt_ids)
            if (t < 0 || t >= nv)
                bad_request("prompt token id " + std::to_string(t) +
                                " is outside the vocabulary (" + std::to_string(nv) + " tokens)",
                            "prompt");
        p.prompt = req.prompt_ids;
    } else {
        p.prompt = tokenize(req.prompt);
    }
    const int n_prompt = int(p.prompt.size());
    if (n_prompt > n_ctx_) {
        bad_request("the prompt is " + std::to_string(n_prompt) + " tokens but the context holds " +
                        std::to_string(n_ctx_),
                    prompt_param);
    }
    if (req.max_tokens > 0 && n_prompt + req.max_tokens > n_ctx_) {
        bad_request("max_tokens " + std::to_string(req.max_tokens) + " + the prompt's " +
                        std::to_string(n_prompt) + " tokens exceed the context of " +
                        std::to_string(n_ctx_) + " tokens",
                    "max_tokens");
    }
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

std::unique_ptr<Drafter> Engine::make_drafter(const SamplingParams& sp) const {
    if (cfg_.spec_type == "draft_model") {
        return std::make_unique<DraftModelDrafter>(
            *draft_, DraftModelParams{n_ctx_, n_threads_slot_, 0.0f, sp});
    }
    if (cfg_.spec_type == "ngram") return std::make_unique<NgramDrafter>(NgramParams{});
    return nullptr;
}

// Greedy drafting does not depend on the request, so greedy requests share the slot's drafter
// (its draft Session is allocated once); a sampling request gets a fresh one whose draws follow
// the request's seed. N-gram drafting is deterministic: always the slot's.
Drafter* Engine::drafter_for(Slot& slot, const SamplingParams& sp,
                             std::unique_ptr<Drafter>& own) const {
    if (cfg_.spec_type.empty()) return nullptr;
    if (sp.temp <= 0.f || cfg_.spec_type == "ngram") {
        if (!slot.drafter) slot.drafter = make_drafter(SamplingParams{0.f, 0, 1.f, 0.f, 0});
        return slot.drafter.get();
    }
    own = make_drafter(sp);
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
    Drafter* inner = drafter_for(slot, sp, own_drafter);
    std::unique_ptr<TrackingDrafter> drafter;
    if (inner) drafter = std::make_unique<TrackingDrafter>(*inner);

    GenParams gp;
    gp.n_predict = p.n_predict;
    gp.ignore_eos = r.ignore_eos;
    gp.n_draft = r.n_draft.value_or(cfg_.n_draft);
    gp.draft_auto = cfg_.draft_auto && !r.n_draft;
    Generator gen(*slot.target, sampler, drafter.get(), gp);
    if (gp.draft_auto && slot.draft_length) gen.set_draft_length(*slot.draft_length);

    Completion c;
    const Tokenizer& tok = target_->tokenizer();
    TextStream text(r.stop);
    bool cancelled = false;
    auto send = [&](std::vector<TokenPiece> pieces) {
        for (const auto& piece : pieces) c.text += piece.text;
        if (!cancelled && !pieces.empty() && !sink(pieces)) cancelled = true;
        return !cancelled;
    };
    c.stats = gen.generate(p.prompt, [&](token_id id) {
        if (c.ttft_s == 0) c.ttft_s = seconds_since(p.t_arrival);
        const bool drafted = drafter && drafter->next_is_drafted();
        const bool stop = text.push(tok.token_to_piece(id, /*special=*/false), drafted);
        return send(text.take()) && !stop;
    });
    if (!cancelled) send(text.finish());
    if (gp.draft_auto) slot.draft_length = gen.draft_length();

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
