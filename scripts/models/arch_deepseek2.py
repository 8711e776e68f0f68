"""deepseek2 (DeepSeek's Multi-head Latent Attention with shared-expert MoE, as GLM-4.7-Flash and
the DeepSeek V3 distills): its keys and tensors as tables, and the files made of them.

  tests/data/arch (make_models.py arch; seed 2026 per tensor, seed names prefixed "deepseek2|"):
    rand-deepseek2-e8x2-tok512-d128-l3-F16.gguf   3 layers of d128, the first dense (ffn 256),
                        the others 8 experts of 64 (top 2) and one shared expert; 4 query heads of
                        64 (32 nope + 32 rope dims) through a q latent of 96, values of 32 through
                        a KV latent of 64 (a cache row: 64 + 32 values); sigmoid gating with a
                        selection bias (exp_probs_b), the weights renormalised and scaled by 1.8
                        (GLM-4.7-Flash's routing); rope base 10000 (normal, not NEOX)
    rand-deepseek2-e8x2-tok512-d128-l3-Q8_0.gguf  the same shapes in Q8_0 with DeepSeek V2's
                        routing: softmax gating, no bias, weights neither renormalised nor scaled;
                        output_norm x3, not x4: ik_llama.cpp's Q8_0 path (flash attention) drifts
                        1.1 from a float64 forward at x4, past the doubled tolerance of 1 (0.78
                        at x3, with logit gaps enough for 100 argmax checks)
    rand-deepseek2-mtp1-e8x2-tok512-d128-l3-F16.gguf  the F16 file's shapes and routing with a
                        4th block, blk.3, its nextn (MTP) layer (block_count 4,
                        nextn_predict_layers 1): an MLA + MoE layer with nextn.{eh_proj, enorm,
                        hnorm, shared_head_norm} (GLM-4.7-Flash's head). No reference: ik_llama.cpp
                        runs a deepseek2 nextn head for GLM-DSA files only.
  make_models.py bench deepseek2: a GLM-4.7-Flash-shaped timing target (BENCH below).
  ik_llama.cpp reads its ik-style MLA files: head_count_kv = head_count, key_length = nope +
  rope, value_length = the value head, one attn_kv_b (not attn_k_b / attn_v_b). Later blocks
  write to the residual at 0.5 the scale of block 0; output_norm x4 (logit std ~4; x3 in Q8_0).
"""
import gguf_writer as g
import model_file
from weights import NORM, Draw, fan_in, row_scaled, seed_names, table

U32, F32, BOOL = g.T_U32, g.T_F32, g.T_BOOL
KEYS = [("context_length", U32, "ctx"),
        ("embedding_length", U32, "d"),
        ("block_count", U32, "n_layer"),
        ("feed_forward_length", U32, "ff"),
        ("leading_dense_block_count", U32, "n_dense"),
        ("attention.head_count", U32, "n_head"),
        ("attention.head_count_kv", U32, "n_head"),
        ("attention.key_length", U32, "head_k"),
        ("attention.value_length", U32, "head_v"),
        ("attention.layer_norm_rms_epsilon", F32, "eps"),
        ("attention.q_lora_rank", U32, "q_lora"),
        ("attention.kv_lora_rank", U32, "kv_lora"),
        ("rope.dimension_count", U32, "rope"),
        ("rope.freq_base", F32, "rope_base"),
        ("expert_count", U32, "n_expert"),
        ("expert_used_count", U32, "n_used"),
        ("expert_feed_forward_length", U32, "ff_exp"),
        ("expert_shared_count", U32, "n_shared"),
        ("expert_weights_scale", F32, "w_scale"),
        ("expert_weights_norm", BOOL, "w_norm"),
        ("expert_gating_func", U32, "gating"),
        ("vocab_size", U32, "vocab_size")]
TAIL = [("nextn_predict_layers", U32, "n_nextn")]  # after general.file_type (MTP files only)

F16, Q8 = g.GGML_F16, g.GGML_Q8_0
TEST = dict(arch="deepseek2", ctx=2048, d=128, n_layer=3, n_dense=1, ff=256, n_head=4, head_k=64,
            head_v=32, rope=32, q_lora=96, kv_lora=64, eps=1e-6, rope_base=10000.0, n_expert=8,
            n_used=2, ff_exp=64, n_shared=1, vocab_size=512, n_vocab=512, res=0.5,
            router_gain=3, seed=2026, name="rand-deepseek2-e8x2-tok512-d128-l3")
GLM_ROUTING = dict(w_scale=1.8, w_norm=True, gating=2, probs_bias=True)
V2_ROUTING = dict(w_scale=1.0, w_norm=False, gating=1, probs_bias=False)
TEST_FILES = {
    "rand-deepseek2-e8x2-tok512-d128-l3-F16.gguf": dict(TEST, **GLM_ROUTING, wtype=F16,
                                                        out_scale=4.0),
    "rand-deepseek2-e8x2-tok512-d128-l3-Q8_0.gguf": dict(TEST, **V2_ROUTING, wtype=Q8,
                                                         out_scale=3.0),
    "rand-deepseek2-mtp1-e8x2-tok512-d128-l3-F16.gguf": dict(
        TEST, **GLM_ROUTING, wtype=F16, out_scale=4.0, n_layer=4, n_nextn=1,
        name="rand-deepseek2-mtp1-e8x2-tok512-d128-l3"),
}

# make_models.py bench deepseek2: GLM-4.7-Flash's shapes (d2048, 20 heads of 192 nope + 64 rope
# dims, q latent 768, KV latent 512, values of 256, a leading dense layer of 10240, then 64
# experts of 1536, top 4, one shared expert, GLM's routing) with 12 of its 47 layers (~6.9B
# weights, Q8_0 ~7.3 GB; not generated here yet) and the tok512 vocabulary; one random stream
# (seed 29).
BENCH = {"deepseek2": dict(
    TEST, **GLM_ROUTING, ctx=32768, d=2048, n_layer=12, n_dense=1, ff=10240, n_head=20,
    head_k=256, head_v=256, rope=64, q_lora=768, kv_lora=512, n_expert=64, n_used=4,
    ff_exp=1536, n_shared=1, res=1.0, router_gain=1, out_scale=1.0, wtype=Q8,
    name="deepseek2-glm47flash-e64x4-d2048-l12-Q8_0", stream=29)}


def _attention(h, p, row, r):
    d, nh, hk, hv = h["d"], h["n_head"], h["head_k"], h["head_v"]
    ql, kl, rope = h["q_lora"], h["kv_lora"], h["rope"]
    nope = hk - rope
    return [row(p + "attn_norm.weight", (d,), *NORM, kind=False),
            row(p + "attn_q_a.weight", (ql, d), fan_in(d)),
            row(p + "attn_q_a_norm.weight", (ql,), *NORM, kind=False),
            row(p + "attn_q_b.weight", (nh * hk, ql), fan_in(ql)),
            row(p + "attn_kv_a_mqa.weight", (kl + rope, d), fan_in(d)),
            row(p + "attn_kv_a_norm.weight", (kl,), *NORM, kind=False),
            row(p + "attn_kv_b.weight", (nh * (nope + hv), kl), fan_in(kl)),
            row(p + "attn_output.weight", (d, nh * hv), fan_in(nh * hv, 1, r))]


def _ffn(h, p, row, r, il):
    d = h["d"]
    out = [row(p + "ffn_norm.weight", (d,), *NORM, kind=False)]
    if il < h["n_dense"]:
        ff = h["ff"]
        return out + [row(p + "ffn_gate.weight", (ff, d), fan_in(d)),
                      row(p + "ffn_up.weight", (ff, d), fan_in(d)),
                      row(p + "ffn_down.weight", (d, ff), fan_in(ff, 1, r))]
    e, fe, sh = h["n_expert"], h["ff_exp"], h["n_shared"] * h["ff_exp"]
    out.append(row(p + "ffn_gate_inp.weight", (e, d), fan_in(d, h["router_gain"]), kind=False))
    if h["probs_bias"]:
        out.append(row(p + "exp_probs_b.bias", (e,), 0.1, kind=False))
    return out + [row(p + "ffn_gate_exps.weight", (e, fe, d), fan_in(d)),
                  row(p + "ffn_up_exps.weight", (e, fe, d), fan_in(d)),
                  row(p + "ffn_down_exps.weight", (e, d, fe), fan_in(fe, 1, r)),
                  row(p + "ffn_gate_shexp.weight", (sh, d), fan_in(d)),
                  row(p + "ffn_up_shexp.weight", (sh, d), fan_in(d)),
                  row(p + "ffn_down_shexp.weight", (d, sh), fan_in(sh, 1, r))]


def rows(h):
    """The tensor rows of h, in file order."""
    sd = seed_names(prefix="deepseek2|")
    row = table(sd)
    d, V = h["d"], h["n_vocab"]
    out = [row("token_embd.weight", (V, d), 1.0)]
    for il in range(h["n_layer"]):
        p = f"blk.{il}."
        r = 1.0 if il == 0 else h["res"]
        out += _attention(h, p, row, r) + _ffn(h, p, row, r, il)
        if il >= h["n_layer"] - h.get("n_nextn", 0):
            out += [row(p + "nextn.eh_proj.weight", (d, 2 * d), fan_in(2 * d)),
                    row(p + "nextn.enorm.weight", (d,), *NORM, kind=False),
                    row(p + "nextn.hnorm.weight", (d,), *NORM, kind=False),
                    row(p + "nextn.shared_head_norm.weight", (d,), *NORM, h["out_scale"],
                        kind=False)]
    out.append(row("output_norm.weight", (d,), 0.1, 1.0, h["out_scale"], kind=False))
    head = Draw(sd("output.weight"), (V, d), fan_in(d))
    out.append(("output.weight", row_scaled(head, sd("output.rownorm"), 0.25), True))
    return out


def write(path, h, vocab_kv, quiet=False):
    model_file.write(path, h, KEYS, TAIL if h.get("n_nextn") else [], vocab_kv, rows(h), quiet)
