// TextStream: turns generated token pieces into text that is safe to send, one token at a time.
// It holds back (a) the end of the text that could still become a stop string and (b) an
// incomplete UTF-8 sequence at the end (byte-fallback tokens split characters), and cuts the text
// at the first complete stop string. Text leaves as segments that remember which token produced
// them and whether that token was an accepted draft, so the web UI can colour every token.
#pragma once

#include <deque>
#include <string>
#include <vector>

namespace specula {

struct TokenPiece {
    std::string text;
    bool drafted = false;  // an accepted draft token (vs the target's own token)
    int index = -1;        // which generated token (0-based) the text came from
};

class TextStream {
  public:
    // keep_stop: the text ends after the stop string instead of before it (vLLM's
    // include_stop_str_in_output).
    explicit TextStream(std::vector<std::string> stops, bool keep_stop = false)
        : stops_(std::move(stops)), keep_stop_(keep_stop) {}

    // Adds one token's piece. Returns true when a stop string is now complete: the text is cut
    // just before it and nothing more may be pushed.
    bool push(const std::string& piece, bool drafted, int index = -1);

    // Removes and returns what can be sent now (all of it after a stop).
    std::vector<TokenPiece> take();
    // Removes and returns everything still held (generation is over).
    std::vector<TokenPiece> finish();

    bool stopped() const { return stopped_; }
    // The stop string that ended the text ("" before that).
    const std::string& matched() const { return matched_; }

  private:
    std::vector<TokenPiece> release(size_t n_bytes);
    size_t held_back_for_stops() const;

    std::vector<std::string> stops_;
    bool keep_stop_ = false;
    std::string matched_;
    std::deque<TokenPiece> pending_;
    std::string text_;  // the concatenated text of pending_
    size_t ready_ = 0;  // bytes of text_ that may be sent
    bool stopped_ = false;
};

// Bytes at the end of `s` that begin a UTF-8 sequence not yet complete (0..3).
size_t incomplete_utf8_tail(const std::string& s);

}  // namespace specula
