// check_vocab_compatible: see vocab_check.h.
#include "speculative/vocab_check.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "common/error.h"

namespace specula {

namespace {

// Token text for a one-line message: control bytes as \xNN.
std::string printable(const std::string& text) {
    std::string out;
    for (unsigned char c : text) {
        if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02X", c);
            out += buf;
        } else {
            out += char(c);
        }
    }
    return out;
}

void check_special(const char* what, token_id t, token_id d, const std::string& tn,
                   const std::string& dn) {
    if (t != d)
        fail("draft vocabulary mismatch: ", what, " id is ", t, " in ", tn, " but ", d, " in ", dn);
}

}  // namespace

void check_vocab_compatible(const Tokenizer& target, const Tokenizer& draft, const std::string& tn,
                            const std::string& dn) {
    if (target.model() != draft.model())
        fail("draft vocabulary mismatch: tokenizer model '", target.model(), "' in ", tn, " but '",
             draft.model(), "' in ", dn);
    check_special("BOS", target.bos(), draft.bos(), tn, dn);
    check_special("EOS", target.eos(), draft.eos(), tn, dn);
    check_special("EOT", target.eot(), draft.eot(), tn, dn);
    if (target.add_bos() != draft.add_bos())
        fail("draft vocabulary mismatch: add_bos is ", target.add_bos(), " in ", tn, " but ",
             draft.add_bos(), " in ", dn);
    const int nt = target.n_vocab(), nd = draft.n_vocab();
    for (token_id id = 0; id < std::min(nt, nd); ++id) {
        if (target.token_text(id) != draft.token_text(id))
            fail("draft vocabulary mismatch at token id ", id, ": '",
                 printable(target.token_text(id)), "' in ", tn, " but '",
                 printable(draft.token_text(id)), "' in ", dn);
    }
    if (std::abs(nt - nd) > kSpecVocabMaxSizeDifference)
        fail("draft vocabulary mismatch: ", nt, " tokens in ", tn, " but ", nd, " in ", dn,
             " (the sizes may differ by at most ", kSpecVocabMaxSizeDifference, ")");
}

}  // namespace specula
