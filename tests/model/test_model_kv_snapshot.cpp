// KV snapshots (model/state/kv_cache.h KVSnapshot, Session::snapshot / restore: the server's
// --cache-ram pool): a session restored from another's snapshot continues bit-identically (the next
// token's logits equal the original's, for f32, f16 and q8_0 caches), holds the same tokens, and a
// snapshot of another shape or of a sliding-window model is refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "model/load/model.h"
#include "model/session.h"
#include "test_util.h"

namespace {

using specula::KVType;
using specula::Model;
using specula::Session;
using specula::SessionParams;
using specula::token_id;

SessionParams params(int n_ctx, KVType t) {
    SessionParams sp;
    sp.n_ctx = n_ctx;
    sp.n_threads = 1;
    sp.type_k = sp.type_v = t;
    return sp;
}

TEST(KvSnapshot, ARestoredSessionContinuesBitIdentically) {
    const auto model =
        Model::load(specula::test::shared_path("models/tinystories/stories260K.gguf"));
    const std::vector<token_id> prompt = {1, 403, 407, 261, 378, 343, 169, 505, 1, 42};
    const std::vector<token_id> next = {300, 301};
    for (KVType t : {KVType::F32, KVType::F16, KVType::Q8_0}) {
        Session a(*model, params(64, t));
        a.eval(prompt, false);
        ASSERT_TRUE(a.can_snapshot());
        const specula::KVSnapshot snap = a.snapshot();
        EXPECT_EQ(snap.tokens, prompt);
        Session b(*model, params(64, t));
        b.eval(std::vector<token_id>{7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}, false);
        b.restore(snap);
        EXPECT_EQ(std::vector<token_id>(b.tokens().begin(), b.tokens().end()), prompt);
        a.eval(next, true);
        b.eval(next, true);
        const int nv = model->hparams().n_vocab;
        for (int r = 0; r < 2; ++r)
            for (int i = 0; i < nv; ++i)
                ASSERT_EQ(a.logits(r)[i], b.logits(r)[i])
                    << specula::kv_type_name(t) << " row " << r << " logit " << i;
        // Another context holds the same rows: fine; another type is another shape: refused.
        Session c(*model, params(32, t));
        c.restore(snap);
        EXPECT_EQ(c.n_past(), int(prompt.size()));
        Session d(*model, params(64, t == KVType::F32 ? KVType::F16 : KVType::F32));
        EXPECT_THROW(d.restore(snap), specula::Error);
    }
}

TEST(KvSnapshot, SlidingWindowCachesAreNotSnapshotted) {
    const auto model = Model::load(std::string(SPECULA_SOURCE_DIR) +
                                   "/tests/data/arch/rand-gemma3-tok512-d128-l7-F16.gguf");
    Session s(*model, params(2048, KVType::F16));  // its windowed layers keep rings
    s.eval(std::vector<token_id>{1, 2, 3}, false);
    EXPECT_FALSE(s.can_snapshot());
    EXPECT_THROW(s.snapshot(), specula::Error);
}

}  // namespace
