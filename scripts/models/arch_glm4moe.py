"""The glm4moe family (GLM-4.5 / 4.6 / 4.7 MoE, with their nextn MTP layer): its keys and tensors
as tables, and the files made of them.

  tests/data/arch (make_models.py arch; seed 2026 per tensor, seed names prefixed "glm4moe|"):
    rand-glm4moe-mtp1-e8x2-tok512-d128-l3-F16.gguf   3 main layers plus one MTP (nextn) layer,
                      blk.3 (block_count 4, nextn_predict_layers 1). Attention: 4 heads of 64
                      (Q 256 wide, wider than embedding_length), 2 KV heads, Q/K/V biases, Q/K
                      norms, NEOX rope on 32 of the 64 dims (partial rotary, as GLM's half);
                      layer 0 dense (ffn 192, leading_dense_block_count 1), layers 1-2 and the
                      MTP layer MoE: 8 experts of 32, top 2, sigmoid gating with a selection bias
                      (exp_probs_b), weights renormalised and scaled by 2.5 (GLM-4.5's), one
                      shared expert of 32 (ungated). The MTP layer: eh_proj, enorm, hnorm,
                      shared_head_norm; the output head and embedding shared (as GLM-4.6).
    rand-glm4moe-e8x2-tok512-d128-l3-Q8_0.gguf       the same 3 main layers without Q/K norms
                      (GLM-4.5-Air's attention) and without the MTP layer, Q8_0; the selection
                      bias lifts two experts per layer by 2 (they are the top 2 whatever the
                      sigmoids: Q8_0's rounding would flip near ties against ik_llama.cpp's) and
                      output_norm is at 4x (logit std ~4: enough rows with a clear top 1)
    rand-glm4moe-tok512-d128-l1-draft-Q8_0.gguf      block 0 (the dense one) alone, Q/K norms as
                      the F16 file: its draft (every layer dense: no router)
  Blocks after the first write to the residual at 0.3 the scale of block 0 (the 1-layer prefix
  is a usable draft). The router's logits have a std of ~1.5 (sigmoid weights spread over
  (0, 1), not saturated), the selection bias a std of 0.1; with these seeds no choice of the top
  2 in the F16 file is a near tie against ik_llama.cpp (at 2.5 one was). output_norm at 2x
  (logit std ~2).

  make_models.py bench glm4moe: a GLM-4.5-Air-shaped timing target (BENCH below).
"""
import numpy as np

import gguf_writer as g
import model_file
import weights
from weights import NORM, Draw, fan_in, row_scaled, seed_names, table

U32, F32, BOOL = g.T_U32, g.T_F32, g.T_BOOL
KEYS = model_file.keys(("rope.dimension_count", U32, "n_rot"),
                       ("rope.freq_base", F32, "rope_base"),
                       ("expert_count", U32, "n_expert"),
                       ("expert_used_count", U32, "n_used"),
                       ("expert_feed_forward_length", U32, "ff_exp"),
                       ("expert_shared_count", U32, "n_shared"),
                       ("leading_dense_block_count", U32, "dense_lead"),
                       ("expert_weights_scale", F32, "w_scale"),
                       ("expert_weights_norm", BOOL, "w_norm"),
                       ("expert_gating_func", U32, "gating"))
TAIL = [("nextn_predict_layers", U32, "n_nextn")]  # after general.file_type

TEST = dict(arch="glm4moe", ctx=4096, d=128, n_head=4, n_kv=2, head_dim=64, n_rot=32, ff=192,
            eps=1e-5, rope_base=1e6, vocab_size=512, n_expert=8, n_used=2, ff_exp=32,
            n_shared=1, dense_lead=1, w_scale=2.5, w_norm=True, gating=2, res=0.3,
            router_gain=1.5, bias_std=0.1, out_scale=2.0, qk_norm=True, seed=2026)
F16, Q8 = g.GGML_F16, g.GGML_Q8_0
TEST_FILES = {
    "rand-glm4moe-mtp1-e8x2-tok512-d128-l3-F16.gguf":
        dict(TEST, n_layer=4, n_nextn=1, wtype=F16, name="rand-glm4moe-mtp1-e8x2-tok512-d128-l3"),
    "rand-glm4moe-e8x2-tok512-d128-l3-Q8_0.gguf":
        dict(TEST, n_layer=3, qk_norm=False, fixed_route=True, out_scale=4.0, wtype=Q8,
             name="rand-glm4moe-e8x2-tok512-d128-l3"),
    "rand-glm4moe-tok512-d128-l1-draft-Q8_0.gguf":
        dict(TEST, n_layer=1, wtype=Q8, name="rand-glm4moe-tok512-d128-l1-draft"),
}

# A GLM-4.5-Air-shaped timing target: d 4096, 96 query heads of 128 and 8 KV heads (Q/K/V biases,
# no Q/K norms), rope on 64 of the 128 dims, layer 0 dense (ffn 10944), then MoE layers of 128
# experts of 1408 (8 used, sigmoid with exp_probs_b, normalised, scale 1) and one shared expert;
# the real model's 46 layers shrunk to 3 (1 dense + 2 MoE) plus its nextn layer (blk.3, MoE):
# Q8_0 7.8 GB (each MoE layer ~2.5 GB; ~9 minutes and 12.6 GB of RAM at peak on a 2-core EPYC).
# tok512 vocabulary; one random stream (seed 45).
BENCH = {"glm4moe": dict(
    TEST, ctx=32768, d=4096, n_layer=4, n_nextn=1, n_head=96, n_kv=8, head_dim=128, n_rot=64,
    ff=10944, n_expert=128, n_used=8, ff_exp=1408, w_scale=1.0, rope_base=1e6, res=1.0,
    router_gain=1.0, out_scale=1.0, qk_norm=False, wtype=Q8,
    name="glm4moe-air-e128x8-d4096-l3-mtp1-Q8_0", stream=45)}


def _experts(row, name, shape, std, stream):
    """An experts tensor's row; in a timing file (stream) drawn expert by expert into one float32
    array (3 GB at GLM-4.5-Air's shape: no temporaries of its size)."""
    r = row(name, shape, std)
    if not stream:
        return r
    one = r[1]._replace(shape=shape[1:])

    def make(gen):
        out = np.empty(shape, np.float32)
        for i in range(shape[0]):
            out[i] = weights.value(gen, one)
        return out
    return name, make, True


def _ffn(h, il, p, row, r):
    """Block il's FFN rows: dense in the leading layers, else the routed and shared experts."""
    d = h["d"]
    if il < h["dense_lead"]:
        ff = h["ff"]
        return [row(p + "ffn_gate.weight", (ff, d), fan_in(d)),
                row(p + "ffn_up.weight", (ff, d), fan_in(d)),
                row(p + "ffn_down.weight", (d, ff), fan_in(ff, 1, r))]
    e, fe = h["n_expert"], h["ff_exp"]
    fs = fe * h["n_shared"]
    st = "stream" in h
    bias = row(p + "exp_probs_b.bias", (e,), h["bias_std"], kind=False)
    if h.get("fixed_route"):  # +2 on two experts per layer: the top 2, whatever the sigmoids say
        lift = [2.0 if x in (il % e, (il + 3) % e) else 0.0 for x in range(e)]
        bias = (bias[0], lambda gen, b=bias[1]: weights.value(gen, b) + np.float32(lift), False)
    return [row(p + "ffn_gate_inp.weight", (e, d), fan_in(d, h["router_gain"]), kind=False),
            bias,
            _experts(row, p + "ffn_gate_exps.weight", (e, fe, d), fan_in(d), st),
            _experts(row, p + "ffn_up_exps.weight", (e, fe, d), fan_in(d), st),
            _experts(row, p + "ffn_down_exps.weight", (e, d, fe), fan_in(fe, 1, r), st),
            row(p + "ffn_gate_shexp.weight", (fs, d), fan_in(d)),
            row(p + "ffn_up_shexp.weight", (fs, d), fan_in(d)),
            row(p + "ffn_down_shexp.weight", (d, fs), fan_in(fs, 1, r))]


def _layer(h, il, row):
    """The rows of block il (an MTP layer's head tensors too)."""
    p = f"blk.{il}."
    d, hd, r = h["d"], h["head_dim"], 1.0 if il == 0 else h["res"]
    dq, dkv = h["n_head"] * hd, h["n_kv"] * hd
    out = [row(p + "attn_norm.weight", (d,), *NORM, kind=False),
           row(p + "attn_q.weight", (dq, d), fan_in(d)),
           row(p + "attn_q.bias", (dq,), 0.1, kind=False),
           row(p + "attn_k.weight", (dkv, d), fan_in(d)),
           row(p + "attn_k.bias", (dkv,), 0.1, kind=False),
           row(p + "attn_v.weight", (dkv, d), fan_in(d)),
           row(p + "attn_v.bias", (dkv,), 0.1, kind=False),
           row(p + "attn_output.weight", (d, dq), fan_in(dq, 1, r))]
    if h["qk_norm"]:
        out += [row(p + "attn_q_norm.weight", (hd,), 0.3, 1.5, kind=False),
                row(p + "attn_k_norm.weight", (hd,), 0.3, 1.5, kind=False)]
    out.append(row(p + "post_attention_norm.weight", (d,), *NORM, kind=False))
    out += _ffn(h, il, p, row, r)
    if il >= h["n_layer"] - h.get("n_nextn", 0):
        out += [row(p + "nextn.eh_proj.weight", (d, 2 * d), fan_in(2 * d)),
                row(p + "nextn.enorm.weight", (d,), *NORM, kind=False),
                row(p + "nextn.hnorm.weight", (d,), *NORM, kind=False),
                row(p + "nextn.shared_head_norm.weight", (d,), *NORM, h["out_scale"], kind=False)]
    return out


def rows(h):
    """The tensor rows of h, in file order; seed names: "glm4moe|" and the tensor name without
    ".weight" or ".bias" (but token_embd.weight and output.weight)."""
    sd = seed_names(h["arch"] + "|", short=True)
    row = table(sd)
    d, V = h["d"], h["vocab_size"]
    out = [row("token_embd.weight", (V, d), 1.0)]
    for il in range(h["n_layer"]):
        out += _layer(h, il, row)
    head = Draw(sd("output.weight"), (V, d), fan_in(d))
    out += [row("output_norm.weight", (d,), *NORM, h["out_scale"], kind=False),
            ("output.weight", row_scaled(head, sd("output.rownorm"), 0.25), True)]
    return out


def write(path, h, vocab_kv, quiet=False):
    model_file.write(path, h, KEYS, TAIL, vocab_kv, rows(h), quiet)
