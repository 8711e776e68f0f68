// check_run_options / open_run / PieceWriter: see run_setup.h.
#include "cli/run_setup.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/repetition_options.h"
#include "common/error.h"
#include "common/threadpool.h"
#include "sampling/json_grammar.h"
#include "tokenizer/prompt.h"

namespace specula::cli {

namespace {

// The penalties and logit bias of --repeat-penalty ... --logit-bias.
PenaltyParams penalty_params(const RunOptions& o) {
    PenaltyParams p = o.penalties;
    for (const std::string& b : o.logit_bias) parse_logit_bias(b, p.logit_bias);
    resolve_dry_options(p.dry, o.dry_breakers, o.escape);
    return p;
}

// The grammar of -j / -jf (null without them); an Error names the flag and what the schema asks
// that the grammar does not support.
std::shared_ptr<const JsonGrammar> schema_grammar(const RunOptions& o) {
    if (o.json_schema.empty() && o.json_schema_file.empty()) return nullptr;
    if (!o.json_schema.empty() && !o.json_schema_file.empty())
        fail(
            "give the JSON schema either with -j (--json-schema) or with -jf "
            "(--json-schema-file), not both");
    const bool from_file = !o.json_schema_file.empty();
    const std::string flag =
        from_file ? "-jf (--json-schema-file) " + o.json_schema_file : "-j (--json-schema)";
    const nlohmann::json schema = nlohmann::json::parse(
        from_file ? read_text_file(o.json_schema_file) : o.json_schema, nullptr, false);
    if (schema.is_discarded()) fail(flag, ": not valid JSON");
    if (!schema.is_object())
        fail(flag,
             ": a JSON schema is an object, e.g. '{}' (any JSON value) or "
             "'{\"type\": \"object\"}'");
    try {
        return json_schema_grammar(schema);
    } catch (const Error& e) {
        fail(flag, ": ", e.what());
    } catch (const nlohmann::json::exception& e) {  // a keyword's value of an unexpected type
        fail(flag, ": ", e.what());
    }
}

// The target's constraints; Error names a bad value.
std::unique_ptr<Constraints> make_constraints(const PenaltyParams& p, const Tokenizer& tok,
                                              int n_vocab,
                                              std::shared_ptr<const JsonGrammar> grammar) {
    try {
        std::shared_ptr<const GrammarVocab> vocab;
        if (grammar) vocab = GrammarVocab::from_tokenizer(tok);
        std::shared_ptr<const DryBreakers> breakers;
        if (p.dry.on()) breakers = DryBreakers::from_tokenizer(p.dry.sequence_breakers, tok);
        return std::make_unique<Constraints>(p, n_vocab, std::move(grammar), std::move(vocab),
                                             std::move(breakers));
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
    if (!(o.typical_p >= 0.f && o.typical_p <= 1.f))
        fail("--typical must be in [0, 1], got ", o.typical_p);
    if (!std::isfinite(o.top_n_sigma))
        fail("--top-nsigma must be a finite number, got ", o.top_n_sigma);
    check_xtc_options(o.xtc_probability, o.xtc_threshold);
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

std::unique_ptr<RunSetup> open_run(const RunOptions& o, const SpeculativeConfig& spec,
                                   const std::function<void(const Runtime&)>& before_caches) {
    auto e = std::make_unique<RunSetup>();
    const PenaltyParams penalties = penalty_params(o);
    std::shared_ptr<const JsonGrammar> grammar = schema_grammar(o);  // before the model loads
    e->sampler = std::make_unique<Sampler>(SamplingParams{o.temp, o.top_k, o.top_p, o.min_p, o.seed,
                                                          o.typical_p, o.top_n_sigma,
                                                          o.xtc_probability, o.xtc_threshold});
    RuntimeOptions ro;
    ro.model_path = o.model;
    ro.gpu = o.placement.target;
    ro.repack_cache = o.repack_cache;
    ro.speculative = spec;
    ro.speculative.draft_gpu = o.placement.draft;
    ro.n_ctx = o.n_ctx;  // 0: the training context
    ro.n_threads = o.n_threads;
    ro.n_ubatch = o.n_ubatch;
    ro.check_tensors = o.check_tensors;
    ro.type_k = parse_kv_type(o.cache_type_k, "-ctk (--cache-type-k)");
    ro.type_v = parse_kv_type(o.cache_type_v, "-ctv (--cache-type-v)");
    ro.sampling = e->sampler->params();  // the seed drawn: the drafter follows it
    ro.quiet = !log_enabled();
    ro.before_caches = [&](const Runtime& rt) {
        if (before_caches) before_caches(rt);
        e->constraints = make_constraints(penalties, rt.target->tokenizer(),
                                          rt.target->hparams().n_vocab, grammar);
    };
    e->rt = open_runtime(ro);
    const Runtime& rt = e->rt;
    log("model: %s | n_ctx: %d | kv cache: k %s, v %s | threads: %d | seed: %llu",
        rt.target->describe().c_str(), rt.n_ctx, kv_type_name(rt.type_k), kv_type_name(rt.type_v),
        rt.n_threads, static_cast<unsigned long long>(e->sampler->seed()));
    e->gen = gen_params(rt, o.n_predict, o.ignore_eos);
    if (rt.drafter)
        log("speculative: %s%s, draft %s", rt.drafter->name(),
            rt.target->mtp_file() ? (" (head from " + rt.target->mtp_path() + ")").c_str() : "",
            draft_length_name(rt.speculative.config).c_str());
    return e;
}

Generator RunSetup::make_generator() {
    return Generator(*rt.session, *sampler, rt.drafter.get(), gen,
                     rt.speculative.config.draft_auto ? &auto_length : nullptr, constraints.get());
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
