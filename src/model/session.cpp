// Session (see session.h): a KV cache, the logits of the last eval, and the ForwardPass
// (forward.cpp) that Session::eval runs over its tokens; the device offload it was given.
#include "model/session.h"

#include <algorithm>
#include <vector>

#include "common/error.h"
#include "model/forward_pass.h"
#include "model/state/sequence_state.h"

namespace specula {

namespace {

const SessionParams& checked(const Model& model, const SessionParams& p) {
    if (p.shared_pass && &p.shared_pass->model() != &model)
        fail("SessionParams::shared_pass was made for another model");
    return p;
}

}  // namespace

Session::Session(const Model& model, const SessionParams& params)
    : impl_(std::make_unique<SequenceState>(model, checked(model, params))) {}

Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

void Session::eval(std::span<const token_id> tokens, bool all_logits) {
    SequenceState& s = *impl_;
    s.check(tokens);
    if (!s.pass) s.pass = std::make_shared<ForwardPass>(s.model);
    // A pass takes at most n_ubatch tokens (ring caches: at most max_pass): longer runs go in
    // pieces, each piece's logits rows after the previous ones' (without all_logits each piece
    // leaves its last row in row 0: the last piece's is the one asked for).
    const size_t step = size_t(s.max_pass());
    for (size_t at = 0; at < tokens.size() || at == 0; at += step) {
        const size_t n = std::min(step, tokens.size() - at);
        PassSegment seg{&s, tokens.subspan(at, n), all_logits};
        seg.logits_row = all_logits ? int(at) : 0;
        s.pass->run(std::span(&seg, 1), *s.pool);
        if (n == 0) break;
    }
}

std::shared_ptr<ForwardPass> make_shared_pass(const Model& model) {
    return std::make_shared<ForwardPass>(model);
}

int Session::kv_touched() const {
    const SequenceState& s = *impl_;
    return std::max(s.kv.own_touched(), s.mtp_kv ? s.mtp_kv->touched() : 0);
}

void Session::release_kv() {
    impl_->kv.release_unused();
    if (impl_->mtp_kv) impl_->mtp_kv->release_unused();
}

double Session::buffer_bytes() const {
    const SequenceState& s = *impl_;
    const double floats =
        double(s.logits.capacity()) + double(s.hidden.capacity()) + double(s.captured.capacity());
    return (s.pass ? s.pass->allocated_bytes() : 0.0) + sizeof(float) * floats;
}

const float* Session::logits(int i) const {
    if (i < 0 || i >= impl_->n_logits) {
        fail("logits(", i, "): the last eval produced ", impl_->n_logits, " rows");
    }
    return impl_->logits.data() + static_cast<size_t>(i) * impl_->model.hparams().n_vocab;
}

int Session::n_logits() const {
    return impl_->n_logits;
}
int Session::n_past() const {
    return impl_->kv.n_past();
}
std::span<const token_id> Session::tokens() const {
    return impl_->kv.tokens();
}
int Session::common_prefix(std::span<const token_id> t) const {
    const int k = impl_->kv.common_prefix(t);
    return impl_->rec.restorable_floor(k, impl_->kv.n_past());
}
int Session::n_ctx() const {
    return impl_->kv.n_ctx();
}
int Session::n_threads() const {
    return impl_->pool->size();
}
ThreadPool& Session::pool() const {
    return *impl_->pool;
}
bool Session::can_snapshot() const {
    // A snapshot holds KV rows only: not a ring (sliding-window layers) nor a recurrent state.
    return !impl_->offload && !impl_->kv.has_ring() && impl_->model.hparams().n_recurrent() == 0;
}
KVSnapshot Session::snapshot() const {
    return impl_->kv.save(impl_->kv.n_past(), impl_->pool);
}
void Session::restore(const KVSnapshot& s) {
    if (!can_snapshot()) fail("this session's KV cache cannot be restored from host memory");
    impl_->kv.restore(s);
}
std::shared_ptr<KVCache> Session::new_prefix_block() const {
    if (!can_snapshot()) fail("this session's KV cache cannot share a prefix");
    const SequenceState& s = *impl_;
    const HParams& hp = s.model.hparams();
    return std::make_shared<KVCache>(kv_shapes(hp), s.kv.n_ctx(), s.kv.type_k(), s.kv.type_v(),
                                     kv_windows(hp), 0, /*small_pages=*/true);
}
void Session::share_prefix(std::shared_ptr<KVCache> block, int limit) {
    if (!can_snapshot()) fail("this session's KV cache cannot share a prefix");
    reset();
    impl_->kv.share_prefix(std::move(block), limit);
}
int Session::shared_prefix() const {
    return impl_->kv.shared();
}
int Session::n_gpu_layers() const {
    return impl_->offload ? impl_->offload->n_layers() : 0;
}

void Session::rollback(int n_past) {
    if (n_past < 0 || n_past > impl_->kv.n_past()) {
        fail("rollback(", n_past, "): must be in [0, n_past = ", impl_->kv.n_past(), "]");
    }
    if (!impl_->kv.can_keep(n_past)) {
        fail("rollback(", n_past, "): the sliding-window layers' ring caches no longer hold the ",
             "window before position ", n_past,
             " (they reach back swa_max_pass = ", impl_->kv.max_pass(),
             " positions behind the furthest one written)");
    }
    impl_->rec.restore(impl_->model, n_past, impl_->kv.n_past(), *impl_->pool);
    impl_->kv.truncate(n_past);
}

void Session::unshare() {
    rollback(0);
    impl_->kv.unshare();
}

const float* Session::hidden(int i) const {
    if (!impl_->keep_hidden) {
        fail("hidden(", i, "): ", impl_->model.file().path(),
             " keeps no hidden rows in this session (SessionParams::keep_hidden)");
    }
    if (i < 0 || i >= impl_->n_logits) {
        fail("hidden(", i, "): the last eval produced ", impl_->n_logits, " rows");
    }
    return impl_->hidden.data() + static_cast<size_t>(i) * impl_->model.hparams().n_embd;
}

void Session::eval_mtp(std::span<const token_id> next, const float* hidden) {
    SequenceState& s = *impl_;
    s.check_mtp(next);
    if (!s.pass) s.pass = std::make_shared<ForwardPass>(s.model);
    const MtpSegment seg{&s, next, hidden};
    s.pass->run_mtp(std::span(&seg, 1), *s.pool);
}

const float* Session::mtp_logits(int t) const {
    impl_->require_mtp();
    if (t < 0 || t >= impl_->n_mtp) {
        fail("mtp_logits(", t, "): the last eval_mtp produced ", impl_->n_mtp, " rows");
    }
    return impl_->mtp_logits.data() + static_cast<size_t>(t) * impl_->model.hparams().n_vocab;
}

const float* Session::mtp_hidden(int t) const {
    impl_->require_mtp();
    if (t < 0 || t >= impl_->n_mtp) {
        fail("mtp_hidden(", t, "): the last eval_mtp produced ", impl_->n_mtp, " rows");
    }
    return impl_->mtp_hidden.data() + static_cast<size_t>(t) * impl_->model.hparams().n_embd;
}

int Session::mtp_n_past() const {
    impl_->require_mtp();
    return impl_->mtp_kv->n_past();
}

void Session::mtp_rollback(int n) {
    impl_->require_mtp();
    if (n < 0 || n > impl_->mtp_kv->n_past()) {
        fail("mtp_rollback(", n, "): must be in [0, mtp_n_past = ", impl_->mtp_kv->n_past(), "]");
    }
    impl_->mtp_kv->truncate(n);
}

bool Session::can_rollback(int n_past) const {
    return n_past >= 0 && n_past <= impl_->kv.n_past() && impl_->kv.can_keep(n_past) &&
           impl_->rec.restorable_floor(n_past, impl_->kv.n_past()) == n_past;
}

const float* Session::captured(int t) const {
    const SequenceState& s = *impl_;
    if (s.capture_layers.empty()) fail("captured(", t, "): the session captures no layer");
    if (t < 0 || t >= s.n_captured) {
        fail("captured(", t, "): the last eval captured ", s.n_captured, " rows");
    }
    return s.captured.data() + size_t(t) * size_t(capture_width());
}

int Session::n_captured() const {
    return impl_->n_captured;
}

int Session::capture_width() const {
    return int(impl_->capture_layers.size()) * impl_->model.hparams().n_embd;
}

const KVCache& Session::kv() const {
    return impl_->kv;
}

const Model& Session::model() const {
    return impl_->model;
}

}  // namespace specula
