// SequenceState (see sequence_state.h): made from SessionParams, checked before a pass.
#include "model/state/sequence_state.h"

#include <algorithm>
#include <vector>

#include "common/error.h"

namespace specula {

int resolve_ctx(const HParams& hp, int n_ctx) {
    if (n_ctx < 0) fail("n_ctx must be >= 0, got ", n_ctx);
    if (n_ctx > 0) return n_ctx;
    return hp.n_ctx_train > 0 ? std::min(hp.n_ctx_train, SessionParams::kDefaultMaxCtx)
                              : SessionParams::kDefaultMaxCtx;
}

std::vector<KVLayerShape> kv_shapes(const HParams& hp) {
    std::vector<KVLayerShape> s(size_t(hp.n_layer));
    for (int il = 0; il < hp.n_layer; ++il)
        s[size_t(il)] = {hp.layer_n_embd_kv(il), hp.layer_head_dim(il), hp.kv_v_is_k};
    return s;
}

KVLayerShape mtp_kv_shape(const HParams& hp) {
    return {hp.n_embd_kv(), hp.head_dim, hp.kv_v_is_k};
}

std::vector<int> kv_windows(const HParams& hp) {
    std::vector<int> w(size_t(hp.n_layer));
    for (int il = 0; il < hp.n_layer; ++il)
        w[size_t(il)] = hp.is_recurrent(il) || !hp.own_kv(il) || hp.layer_n_head_kv(il) == 0
                            ? -1
                            : hp.window(il);
    return w;
}

namespace {

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

SequenceState::SequenceState(const Model& m, const SessionParams& p)
    : model(m),
      own_pool(p.pool ? nullptr : std::make_unique<ThreadPool>(default_threads(p.n_threads))),
      pool(p.pool ? p.pool : own_pool.get()),
      kv(kv_shapes(m.hparams()), resolve_ctx(m.hparams(), p.n_ctx), p.type_k, p.type_v,
         kv_windows(m.hparams()), swa_max_pass(p), p.kv_small_pages),
      rec(m.hparams(), p.recurrent_rollback),
      capture_layers(specula::capture_layers(m, p)),
      keep_hidden(p.keep_hidden || m.has_mtp()),
      n_ubatch(ubatch(p)) {
    pass = p.shared_pass;  // made for this model (Session checks), or null
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
        const KVLayerShape head[] = {mtp_kv_shape(m.hparams())};
        mtp_kv = std::make_unique<KVCache>(head, kv.n_ctx(), p.type_k, p.type_v,
                                           std::span<const int>{}, 0, p.kv_small_pages);
    }
}

SequenceState::~SequenceState() = default;

int SequenceState::max_pass() const {
    return kv.has_ring() ? std::min(n_ubatch, kv.max_pass()) : n_ubatch;
}

void SequenceState::check(std::span<const token_id> tokens) const {
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

void SequenceState::require_mtp() const {
    if (!mtp_kv) {
        fail(model.file().path(), ": the model has no MTP head (key '", model.hparams().arch,
             ".nextn_predict_layers' is 0 or missing, no blk.N.nextn.* tensors)");
    }
}

void SequenceState::check_mtp(std::span<const token_id> next) const {
    require_mtp();
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

}  // namespace specula
