// GrammarState: where a generation stands in a JsonGrammar (json_grammar.h): a deterministic
// pushdown matcher over the output bytes. Every byte either extends a valid prefix of some
// admitted JSON text or is refused; a prefix the matcher accepts can always be completed (no dead
// ends), and can_end() says when the text is a complete admitted value.
//
// It is a small value type (a fixed array of frames, no heap), so a snapshot is a copy: the
// speculative verifier copies the state before checking drafted tokens and copies it back, or
// keeps one state per draft position. Tokens are advanced through GrammarVocab (grammar_vocab.h),
// which also masks a logit row.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "sampling/json_grammar.h"

namespace specula {

class GrammarState {
  public:
    explicit GrammarState(std::shared_ptr<const JsonGrammar> grammar);
    GrammarState(const GrammarState& o) { *this = o; }
    GrammarState& operator=(const GrammarState& o);

    // Consumes one byte; false when the byte cannot continue the output. After false the state
    // is unusable (callers advance a copy; advance(bytes) does that for you).
    bool step(uint8_t c);
    // Consumes all bytes, or none: on false the state is unchanged.
    bool advance(std::string_view bytes);

    // The output so far is one complete admitted value (an end-of-generation token may follow).
    bool can_end() const;
    // Nothing but the end can follow (the top-level value is closed).
    bool finished() const;
    // The fewest bytes that complete the output from here (0 when can_end()). Following a byte
    // that lowers it reaches the end; a generation loop can use it to close the JSON when it runs
    // short of tokens, and the tests use it to end random walks.
    size_t min_remaining() const;
    // What the grammar forces from here: `out` becomes the longest byte string (at most max_len
    // bytes) that is the only way the output can go on, ignoring the optional whitespace between
    // JSON tokens (a space that is string or key content is an alternative like any byte). After
    // `{` of an object whose only possible first key is "name" (a string), that is `"name":"`;
    // inside an enum with one candidate left, the rest of it; a const value; a closing `}` when
    // nothing else is legal. Empty when the output may end here (can_end(): an end-of-generation
    // token is the other way) or two bytes are legal. step() accepts the bytes in order. This is
    // what sampling would produce if it never chose optional whitespace; a speculative engine
    // drafts it (sampling/grammar_vocab.h forced_tokens), and the verifier decides.
    void forced_bytes(std::string& out, size_t max_len) const;
    // Bytes consumed so far.
    uint64_t n_bytes() const { return n_bytes_; }
    const JsonGrammar& grammar() const { return *g_; }

    // Inside a string in its plain state (no escape or UTF-8 sequence pending, no key or enum
    // matching, no pattern / format left to enforce: after a searched pattern has matched, or,
    // with no maxLength, while a position matching every code point is open, as before a search):
    // any run of string content without a quote (bytes >= 0x20, escapes, UTF-8, possibly ending
    // inside an escape or a UTF-8 sequence) is admitted if it starts at most
    // plain_string_budget() code points (maxLength; SIZE_MAX: no limit).
    bool in_plain_string() const;
    size_t plain_string_budget() const;

  private:
    struct Frame {
        int32_t node;
        uint8_t kind, sub, ws, aux, aux2;
        uint32_t u, v, w;
        uint64_t seen;
    };
    static constexpr int kMaxFrames = 52;  // root + max_depth (<= 48) containers + key/scalar

    // The innermost open construct is a container or the root: a whitespace byte that leaves the
    // state so was whitespace between JSON tokens, not string content.
    bool between_tokens() const;
    Frame& top() { return frames_[depth_ - 1]; }
    const Frame& top() const { return frames_[depth_ - 1]; }
    Frame& push(uint8_t kind, int32_t node);
    void pop();
    bool ws(Frame& f, uint8_t c);
    bool start_value(int32_t node, uint8_t c);
    bool key_possible(const Frame& obj) const;
    bool step_root(Frame& f, uint8_t c);
    // The root frame's framing: the grammar's own, or that of the alternative it stands in
    // (while a prefix is read, the first of those still matching).
    const std::string& prefix_of(const Frame& root) const;
    const std::string& suffix_of(const Frame& root) const;
    int32_t root_of(const Frame& root) const;
    bool step_object(Frame& f, uint8_t c);
    bool step_array(Frame& f, uint8_t c);
    bool step_key(Frame& f, uint8_t c);
    bool close_key(Frame& key, uint32_t prop);
    int step_string_body(Frame& f, uint8_t c);  // -1 refuse, 0 consumed, 1 closing quote
    int step_rule_string(Frame& f, const StringRule& r, uint8_t c);  // same, with a StringRule
    size_t rule_rest(const Frame& f, const StringRule& r) const;     // the string's rest, quote too
    const StringRule* rule_of(const Frame& f) const;  // a String frame's rule, or nullptr
    int step_number(Frame& f, uint8_t c);             // -1 refuse, 0 consumed, 1 ended before c
    int step_literal(Frame& f, uint8_t c);            // same
    size_t min_len(int32_t node) const;               // shortest complete value of a node
    size_t object_tail(const Frame& obj, uint64_t seen) const;  // after a value: ", ...}"
    size_t after_key(const Frame& obj, uint32_t prop) const;    // ':' value and the tail

    std::shared_ptr<const JsonGrammar> keep_;
    const JsonGrammar* g_ = nullptr;  // keep_.get(); copies between states share it (no refcount)
    int depth_ = 0;
    int containers_ = 0;
    uint64_t n_bytes_ = 0;
    std::array<Frame, kMaxFrames> frames_;
};

}  // namespace specula
