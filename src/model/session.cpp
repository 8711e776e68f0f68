// Session (see session.h): a KV cache, the logits of the last eval, and the ForwardPass
// (forward.cpp) that Session::eval runs over its tokens; the device offload it was given.
#include "model/session.h"

#include <algorithm>
#include <vector>

#include "common/error.h"
#include "model/forward_pass.h"
#include "model/session_impl.h"

namespace specula {

int resolve_ctx(const HParams& hp, int n_ctx) {
    if (n_ctx < 0) fail("n_ctx must be >= 0, got ", n_ctx);
    if (n_ctx > 0) return n_ctx;
    return hp.n_ctx_train > 0 ? std::min(hp.n_ctx_train, SessionParams::kDefaultMaxCtx)
                              : SessionParams::kDefaultMaxCtx;
}

namespace {

std::vector<int> layer_windows(const HParams& hp) {
    std::vector<int> w(size_t(hp.n_layer));
    for (int il = 0; il < hp.n_layer; ++il)
        w[size_t(il)] = hp.is_recurrent(il) ? -1 : hp.window(il);
    return w;
}

int ubatch(const SessionParams& p) {
    if (p.n_ubatch < 1) fail("n_ubatch (-ub) must be >= 1, got ", p.n_ubatch);
    return p.n_ubatch;
}

// SessionParams::capture_layers, checked and sorted.
std::vector<int> capture_layers(const Model& m, const SessionParams& p) {
    std::vector<int> l = p.capture_layers;
    std::sort(l.begin(), l.end());
    const int n = m.hparams().n_layer;
    for (size_t i = 0; i < l.size(); ++i) {
        if (l[i] < 0 || l[i] >= n - 1) {
            fail("capture layer ", l[i], " is out of range [0, ", n - 1, ") for ", m.file().path(),
                 " (", n, " layers; the last keeps only its output rows)");
        }
        if (i > 0 && l[i] == l[i - 1]) fail("capture layer ", l[i], " is listed twice");
    }
    return l;
}

int swa_max_pass(const SessionParams& p) {
    if (p.swa_max_pass < 1) fail("swa_max_pass must be >= 1, got ", p.swa_max_pass);
    return p.swa_max_pass;
}

}  // namespace

Session::Impl::Impl(const Model& m, const SessionParams& p)
    : model(m),
      own_pool(p.pool ? nullptr : std::make_unique<ThreadPool>(default_threads(p.n_threads))),
      pool(p.pool ? p.pool : own_pool.get()),
      kv(m.hparams().n_layer, resolve_ctx(m.hparams(), p.n_ctx), m.hparams().n_embd_kv(), p.type_k,
         p.type_v, layer_windows(m.hparams()), swa_max_pass(p), m.hparams().head_dim,
         p.kv_small_pages),
      rec(m.hparams(), p.recurrent_rollback),
      capture_layers(specula::capture_layers(m, p)),
      n_ubatch(ubatch(p)) {
    if (p.shared_pass) {
        if (&p.shared_pass->model() != &m)
            fail("SessionParams::shared_pass was made for another model");
        pass = p.shared_pass;
    }
    OffloadParams op = m.placement();
    if (p.n_gpu_layers >= 0) {
        op.n_gpu_layers = p.n_gpu_layers;
        op.device = p.gpu_device;
    }
    op.n_ctx = kv.n_ctx();
    offload = make_offload(m, op);
    if (offload) kv.set_device_layers(offload->n_layers());
    if (offload && !capture_layers.empty())
        fail("capture_layers: the captured layers must run on the CPU (n_gpu_layers = 0)");
    if (m.has_mtp()) {
        mtp_kv = std::make_unique<KVCache>(1, kv.n_ctx(), m.hparams().n_embd_kv(), p.type_k,
                                           p.type_v, std::span<const int>{}, 0,
                                           m.hparams().head_dim, p.kv_small_pages);
    }
}

Session::Impl::~Impl() = default;

int Session::Impl::max_pass() const {
    return kv.has_ring() ? std::min(n_ubatch, kv.max_pass()) : n_ubatch;
}

void Session::Impl::check(std::span<const token_id> tokens) const {
    const int64_t end = static_cast<int64_t>(kv.n_past()) + tokens.size();
    if (end > kv.n_ctx()) {
        fail("context overflow: ", kv.n_past(), " cached + ", tokens.size(),
             " new tokens exceed n_ctx = ", kv.n_ctx());
    }
    const int n_vocab = model.hparams().n_vocab;
    for (token_id id : tokens) {
        if (id < 0 || id >= n_vocab) {
            fail("token id ", id, " is out of range (n_vocab = ", n_vocab, ")");
        }
    }
}

Session::Session(const Model& model, const SessionParams& params)
    : impl_(std::make_unique<Impl>(model, params)) {}

Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

void Session::eval(std::span<const token_id> tokens, bool all_logits) {
    Impl& s = *impl_;
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
    const Impl& s = *impl_;
    return std::max(s.kv.touched(), s.mtp_kv ? s.mtp_kv->touched() : 0);
}

void Session::release_kv() {
    impl_->kv.release_unused();
    if (impl_->mtp_kv) impl_->mtp_kv->release_unused();
}

double Session::buffer_bytes() const {
    const Impl& s = *impl_;
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
bool Session::can_snapshot() const {
    // A snapshot holds KV rows only: not a ring (sliding-window layers) nor a recurrent state.
    return !impl_->offload && !impl_->kv.has_ring() && impl_->model.hparams().n_recurrent() == 0;
}
KVSnapshot Session::snapshot() const {
    return impl_->kv.save(impl_->kv.n_past());
}
void Session::restore(const KVSnapshot& s) {
    if (!can_snapshot()) fail("this session's KV cache cannot be restored from host memory");
    impl_->kv.restore(s);
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

namespace {

const Session::Impl& need_mtp(const Session::Impl& s) {
    if (!s.mtp_kv) {
        fail(s.model.file().path(), ": the model has no MTP head (key '", s.model.hparams().arch,
             ".nextn_predict_layers' is 0 or missing, no blk.N.nextn.* tensors)");
    }
    return s;
}

}  // namespace

const float* Session::hidden(int i) const {
    need_mtp(*impl_);
    if (i < 0 || i >= impl_->n_logits) {
        fail("hidden(", i, "): the last eval produced ", impl_->n_logits, " rows");
    }
    return impl_->hidden.data() + static_cast<size_t>(i) * impl_->model.hparams().n_embd;
}

void Session::Impl::check_mtp(std::span<const token_id> next) const {
    need_mtp(*this);
    const int64_t end = static_cast<int64_t>(mtp_kv->n_past()) + next.size();
    if (end > mtp_kv->n_ctx()) {
        fail("context overflow: ", mtp_kv->n_past(), " MTP positions + ", next.size(),
             " new exceed n_ctx = ", mtp_kv->n_ctx());
    }
    for (token_id id : next) {
        if (id < 0 || id >= model.hparams().n_vocab) {
            fail("token id ", id, " out of range [0, ", model.hparams().n_vocab, ")");
        }
    }
}

void Session::eval_mtp(std::span<const token_id> next, const float* hidden) {
    Impl& s = *impl_;
    s.check_mtp(next);
    if (!s.pass) s.pass = std::make_shared<ForwardPass>(s.model);
    const MtpSegment seg{&s, next, hidden};
    s.pass->run_mtp(std::span(&seg, 1), *s.pool);
}

const float* Session::mtp_logits(int t) const {
    need_mtp(*impl_);
    if (t < 0 || t >= impl_->n_mtp) {
        fail("mtp_logits(", t, "): the last eval_mtp produced ", impl_->n_mtp, " rows");
    }
    return impl_->mtp_logits.data() + static_cast<size_t>(t) * impl_->model.hparams().n_vocab;
}

const float* Session::mtp_hidden(int t) const {
    need_mtp(*impl_);
    if (t < 0 || t >= impl_->n_mtp) {
        fail("mtp_hidden(", t, "): the last eval_mtp produced ", impl_->n_mtp, " rows");
    }
    return impl_->mtp_hidden.data() + static_cast<size_t>(t) * impl_->model.hparams().n_embd;
}

int Session::mtp_n_past() const {
    return need_mtp(*impl_).mtp_kv->n_past();
}

void Session::mtp_rollback(int n) {
    need_mtp(*impl_);
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
    const Impl& s = *impl_;
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
