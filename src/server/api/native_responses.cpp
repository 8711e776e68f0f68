// llama-server's native bodies: see native_responses.h.
#include "server/api/native_responses.h"

#include <algorithm>

namespace specula {

namespace {

using json = nlohmann::json;

// llama-server's completion_probabilities: [{"id", "token", "logprob", "bytes", "top_logprobs":
// [{"id", "token", "logprob", "bytes"}]}] for the tokens [from, to).
json probabilities(const Completion& c, size_t from, size_t to, const Tokenizer& tok) {
    to = std::min(to, c.logprobs.size());
    from = std::min(from, to);
    const std::vector<TokenLogprob> part(c.logprobs.begin() + long(from),
                                         c.logprobs.begin() + long(to));
    json out = chat_logprobs_json(part, tok)["content"];
    for (size_t i = 0; i < part.size(); ++i) {
        out[i]["id"] = part[i].id;
        for (size_t k = 0; k < part[i].top.size(); ++k)
            out[i]["top_logprobs"][k]["id"] = part[i].top[k].id;
    }
    return out;
}

}  // namespace

json generation_settings(const CompletionRequest& r, int n_ctx) {
    return {{"n_ctx", n_ctx},
            {"n_predict", r.max_tokens},
            {"temperature", r.temperature},
            {"top_k", r.top_k},
            {"top_p", r.top_p},
            {"min_p", r.min_p},
            {"typical_p", r.typical_p},
            {"top_n_sigma", r.top_n_sigma},
            {"xtc_probability", r.xtc_probability},
            {"xtc_threshold", r.xtc_threshold},
            {"repeat_penalty", r.penalties.repeat_penalty},
            {"repeat_last_n", r.penalties.repeat_last_n},
            {"presence_penalty", r.penalties.presence_penalty},
            {"frequency_penalty", r.penalties.frequency_penalty},
            {"dry_multiplier", r.penalties.dry.multiplier},
            {"dry_base", r.penalties.dry.base},
            {"dry_allowed_length", r.penalties.dry.allowed_length},
            {"dry_penalty_last_n", r.penalties.dry.penalty_last_n},
            {"dry_sequence_breakers", r.penalties.dry.sequence_breakers},
            {"mirostat", 0},
            {"seed", r.seed},
            {"stop", r.stop},
            {"ignore_eos", r.ignore_eos},
            {"n_probs", std::max(r.logprobs, 0)},
            {"stream", r.stream},
            {"samplers", json::array({"penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p",
                                      "min_p", "xtc", "temperature"})},
            {"speculative.n_max", r.n_draft.value_or(-1)}};
}

json native_chunk(const ResponseHead& h, const std::vector<TokenPiece>& pieces, const Completion& c,
                  const Tokenizer& tok, StreamCursor& cursor) {
    std::string text;
    int upto = cursor.next_logprob;
    for (const auto& p : pieces) {
        text += p.text;
        upto = std::max(upto, p.index + 1);
    }
    json j = {{"index", 0},
              {"content", text},
              {"tokens", json::array()},
              {"stop", false},
              {"id_slot", c.slot_id},
              {"tokens_predicted", upto},
              {"tokens_evaluated", h.n_prompt}};
    if (h.logprobs >= 0)
        j["completion_probabilities"] =
            probabilities(c, size_t(cursor.next_logprob), size_t(upto), tok);
    cursor.next_logprob = upto;
    return j;
}

json native_final(const ResponseHead& h, const Completion& c, const Tokenizer& tok, bool streamed) {
    const char* stop_type = c.finish_reason == "length" ? "limit" : c.text_stopped ? "word" : "eos";
    json j = {{"index", 0},
              {"content", streamed ? "" : c.echo + c.text},
              {"tokens", json::array()},
              {"id_slot", c.slot_id},
              {"stop", true},
              {"model", h.model},
              {"tokens_predicted", c.stats.n_generated},
              {"tokens_evaluated", c.stats.n_prompt},
              {"generation_settings", h.settings},
              {"prompt", ""},
              {"has_new_line", c.text.find('\n') != std::string::npos},
              {"truncated", false},
              {"stop_type", stop_type},
              {"stopping_word", c.stop_word},
              {"tokens_cached", c.n_cached},
              {"timings", timings_json({c})}};
    if (h.logprobs >= 0 && !streamed)
        j["completion_probabilities"] = probabilities(c, 0, size_t(c.n_text_tokens), tok);
    return j;
}

}  // namespace specula
