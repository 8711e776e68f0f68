// Content is content: see content_guard.h.
#include "chat/content_guard.h"

#include <algorithm>

namespace specula {

namespace {

constexpr char kDel = '\x7f';
constexpr size_t kMaxIndexDigits = 9;

}  // namespace

std::vector<std::string> special_token_texts(const Tokenizer& tok) {
    std::vector<std::string> out;
    for (token_id id = 0; id < tok.n_vocab(); ++id) {
        const TokenAttr a = tok.token_attr(id);
        if ((a == TokenAttr::CONTROL || a == TokenAttr::UNKNOWN) && !tok.token_text(id).empty())
            out.push_back(tok.token_text(id));
    }
    return out;
}

ContentGuard::ContentGuard(const std::vector<std::string>& specials) {
    nodes_.emplace_back();
    std::vector<std::string> texts;
    for (const std::string& t : specials)
        if (!t.empty()) texts.push_back(t);
    if (texts.empty()) return;  // nothing to guard: DEL is left alone too
    texts_.push_back(std::string(1, kDel));
    texts_.insert(texts_.end(), texts.begin(), texts.end());
    for (size_t i = 0; i < texts_.size(); ++i) add(texts_[i], int32_t(i));
}

void ContentGuard::add(const std::string& text, int32_t index) {
    int32_t node = 0;
    for (unsigned char c : text) {
        auto& next = nodes_[size_t(node)].next;
        const auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(c, INT32_MIN));
        if (it != next.end() && it->first == c) {
            node = it->second;
            continue;
        }
        const int32_t child = int32_t(nodes_.size());
        next.insert(it, {c, child});
        nodes_.emplace_back();  // `next` is not used after this
        node = child;
    }
    if (nodes_[size_t(node)].text < 0) nodes_[size_t(node)].text = index;  // the first of equals
    first_[uint8_t(text[0])] = true;
}

size_t ContentGuard::longest_at(std::string_view s, size_t at, int32_t& text) const {
    size_t best = 0;
    int32_t node = 0;
    for (size_t i = at; i < s.size(); ++i) {
        const auto& next = nodes_[size_t(node)].next;
        const uint8_t c = uint8_t(s[i]);
        const auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(c, INT32_MIN));
        if (it == next.end() || it->first != c) break;
        node = it->second;
        if (nodes_[size_t(node)].text >= 0) {
            best = i + 1 - at;
            text = nodes_[size_t(node)].text;
        }
    }
    return best;
}

std::string ContentGuard::guard(std::string_view s) const {
    std::string out;
    size_t copied = 0;
    for (size_t i = 0; i < s.size();) {
        int32_t text = -1;
        const size_t n = first_[uint8_t(s[i])] ? longest_at(s, i, text) : 0;
        if (n == 0) {
            ++i;
            continue;
        }
        out.append(s.substr(copied, i - copied));
        out += kDel;
        out += std::to_string(text);
        out += kDel;
        i += n;
        copied = i;
    }
    if (copied == 0) return std::string(s);
    out.append(s.substr(copied));
    return out;
}

void ContentGuard::guard(nlohmann::ordered_json& j) const {
    if (empty()) return;
    if (j.is_string()) {
        j = guard(j.get_ref<const std::string&>());
    } else if (j.is_array()) {
        for (auto& v : j) guard(v);
    } else if (j.is_object()) {
        nlohmann::ordered_json out = nlohmann::ordered_json::object();
        for (auto it = j.begin(); it != j.end(); ++it) {
            nlohmann::ordered_json v = std::move(it.value());
            guard(v);
            out[guard(it.key())] = std::move(v);
        }
        j = std::move(out);
    }
}

GuardedText ContentGuard::restore(std::string_view rendered) const {
    GuardedText out;
    if (empty()) {
        out.text = std::string(rendered);
        return out;
    }
    out.text.reserve(rendered.size());
    for (size_t i = 0; i < rendered.size();) {
        size_t j = i + 1;
        size_t index = 0;
        while (rendered[i] == kDel && j < rendered.size() && j - i <= kMaxIndexDigits &&
               rendered[j] >= '0' && rendered[j] <= '9')
            index = index * 10 + size_t(rendered[j++] - '0');
        if (rendered[i] != kDel || j == i + 1 || j >= rendered.size() || rendered[j] != kDel ||
            index >= texts_.size()) {
            out.text += rendered[i++];  // not a placeholder (a template cut one): kept as is
            continue;
        }
        const size_t begin = out.text.size();
        out.text += texts_[index];
        if (index != 0) out.plain.push_back({begin, out.text.size()});
        i = j + 1;
    }
    return out;
}

}  // namespace specula
