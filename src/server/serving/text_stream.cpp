// TextStream: see text_stream.h.
#include "server/serving/text_stream.h"

#include <algorithm>

namespace specula {

size_t incomplete_utf8_tail(const std::string& s) {
    const size_t n = s.size();
    for (size_t k = 1; k <= std::min<size_t>(3, n); ++k) {
        const auto c = static_cast<unsigned char>(s[n - k]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
        const size_t need = (c & 0xE0) == 0xC0   ? 2
                            : (c & 0xF0) == 0xE0 ? 3
                            : (c & 0xF8) == 0xF0 ? 4
                                                 : 1;
        return need > k ? k : 0;
    }
    return 0;
}

// The longest suffix of the text that is a proper prefix of some stop string.
size_t TextStream::held_back_for_stops() const {
    size_t hold = 0;
    for (const auto& stop : stops_) {
        const size_t max_len = std::min(stop.size() - 1, text_.size());
        for (size_t len = max_len; len > hold; --len) {
            if (text_.compare(text_.size() - len, len, stop, 0, len) == 0) {
                hold = len;
                break;
            }
        }
    }
    return hold;
}

bool TextStream::push(const std::string& piece, bool drafted, int index) {
    if (stopped_) return true;
    pending_.push_back({piece, drafted, index});
    text_ += piece;
    size_t cut = std::string::npos;
    for (const auto& stop : stops_) {
        const size_t at = text_.find(stop);
        if (at < cut) {
            cut = at;
            matched_ = stop;
        }
    }
    if (cut != std::string::npos) {
        if (keep_stop_) cut += matched_.size();
        // Drop everything from the stop string on.
        size_t keep = cut;
        std::deque<TokenPiece> kept;
        for (auto& p : pending_) {
            if (keep == 0) break;
            if (p.text.size() > keep) p.text.resize(keep);
            keep -= p.text.size();
            kept.push_back(std::move(p));
        }
        pending_ = std::move(kept);
        text_.resize(cut);
        ready_ = cut;
        stopped_ = true;
        return true;
    }
    ready_ = text_.size() - held_back_for_stops();
    ready_ -= incomplete_utf8_tail(text_.substr(0, ready_));
    return false;
}

std::vector<TokenPiece> TextStream::release(size_t n) {
    std::vector<TokenPiece> out;
    size_t left = n;
    while (left > 0 && !pending_.empty()) {
        TokenPiece& p = pending_.front();
        if (p.text.size() <= left) {
            left -= p.text.size();
            out.push_back(std::move(p));
            pending_.pop_front();
        } else {
            out.push_back({p.text.substr(0, left), p.drafted, p.index});
            p.text.erase(0, left);
            left = 0;
        }
    }
    text_.erase(0, n);
    ready_ -= std::min(ready_, n);
    return out;
}

std::vector<TokenPiece> TextStream::take() {
    return release(ready_);
}

std::vector<TokenPiece> TextStream::finish() {
    return release(text_.size());
}

}  // namespace specula
