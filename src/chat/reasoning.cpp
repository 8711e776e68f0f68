// Reasoning split: see reasoning.h.
#include "chat/reasoning.h"

#include "common/error.h"

namespace specula {

namespace {

constexpr std::string_view kOpen = "<think>", kClose = "</think>";
constexpr const char* kSpace = " \t\r\n";

// The length of the longest proper suffix of `s` that starts `tag`.
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
    for (size_t k = std::min(s.size(), tag.size() - 1); k > 0; --k)
        if (s.substr(s.size() - k) == tag.substr(0, k)) return k;
    return 0;
}

}  // namespace

ReasoningFormat parse_reasoning_format(std::string_view name, const char* what) {
    if (name == "none") return ReasoningFormat::none;
    if (name == "deepseek") return ReasoningFormat::deepseek;
    if (name == "auto") return ReasoningFormat::automatic;
    fail(what, " must be none, deepseek or auto, got '", name, "'");
}

bool prompt_opens_reasoning(std::string_view prompt) {
    const size_t end = prompt.find_last_not_of(kSpace);
    if (end == std::string_view::npos) return false;
    return prompt.substr(0, end + 1).ends_with(kOpen);
}

ReasoningSplitter::ReasoningSplitter(bool starts_open) {
    if (starts_open) {
        state_ = State::reasoning;
        lead_ = true;
    }
}

void ReasoningSplitter::emit_reasoning(std::string_view s, ReasoningParts& out) {
    const size_t last = s.find_last_not_of(kSpace);
    if (last == std::string_view::npos) {
        pending_ws_ += s;
        return;
    }
    out.reasoning += pending_ws_;
    out.reasoning += s.substr(0, last + 1);
    pending_ws_ = std::string(s.substr(last + 1));
}

ReasoningParts ReasoningSplitter::push(std::string_view text) {
    ReasoningParts out;
    held_ += text;
    for (;;) {
        if (state_ == State::start) {
            const size_t p = held_.find_first_not_of(kSpace);
            if (p == std::string::npos) return out;  // only whitespace so far
            const std::string_view rest = std::string_view(held_).substr(p);
            if (rest.starts_with(kOpen)) {
                held_.erase(0, p + kOpen.size());
                state_ = State::reasoning;
                lead_ = true;
                continue;
            }
            if (kOpen.starts_with(rest)) return out;  // "<thi": wait for more
            state_ = State::content;
            lead_ = false;
            continue;
        }
        if (lead_) {
            const size_t p = held_.find_first_not_of(kSpace);
            if (p == std::string::npos) {
                held_.clear();
                return out;
            }
            held_.erase(0, p);
            lead_ = false;
        }
        if (state_ == State::content) {
            out.content += held_;
            held_.clear();
            return out;
        }
        const size_t close = held_.find(kClose);
        if (close != std::string::npos) {
            emit_reasoning(std::string_view(held_).substr(0, close), out);
            pending_ws_.clear();
            held_.erase(0, close + kClose.size());
            state_ = State::content;
            lead_ = true;
            continue;
        }
        const size_t keep = partial_tag_suffix(held_, kClose);
        emit_reasoning(std::string_view(held_).substr(0, held_.size() - keep), out);
        held_.erase(0, held_.size() - keep);
        return out;
    }
}

ReasoningParts ReasoningSplitter::finish() {
    ReasoningParts out;
    if (state_ == State::start) {
        out.content = std::move(held_);
    } else if (state_ == State::reasoning) {
        if (!lead_) emit_reasoning(held_, out);  // a cut-off "</thi" is reasoning text
    } else if (!lead_) {
        out.content = std::move(held_);
    }
    held_.clear();
    pending_ws_.clear();
    return out;
}

ReasoningParts split_reasoning(std::string_view text, bool starts_open) {
    ReasoningSplitter s(starts_open);
    ReasoningParts all = s.push(text);
    ReasoningParts tail = s.finish();
    all.reasoning += tail.reasoning;
    all.content += tail.content;
    return all;
}

}  // namespace specula
