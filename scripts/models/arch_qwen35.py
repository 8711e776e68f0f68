"""The qwen35 family (Qwen3.5 / 3.6: Gated DeltaNet layers between gated full-attention ones, and
MTP heads): its keys and tensors as tables, and the files made of them.

  tests/data/arch (make_models.py arch; seed 2026 per tensor, seed names prefixed "qwen35|" or
  "qwen35moe|"):
    rand-qwen35-tok512-d128-l4-F16.gguf        qwen35 (dense): 4 layers, full attention every
                      4th (layer 3, the last; full_attention_interval 4). DeltaNet: conv kernel
                      4, 1 key head and 2 value heads of 64 (inner_size 128, conv_dim 256);
                      attention: 4 heads of 32 (Q doubled with its output gate), 2 KV heads, rope
                      on 8 of 32 dimensions (IMROPE sections 2,1,1,0: every rotated pair follows
                      the text position), ffn 128
    rand-qwen35-mtp1-tok512-d128-l4-F16.gguf   the same 4 layers plus one MTP (nextn) layer,
                      blk.4: gated full attention without an FFN (as Qwen3.5's small models),
                      eh_proj, enorm, hnorm, shared_head_norm; the output head and embedding shared
    rand-qwen35moe-e8x2-tok512-d128-l3-F16.gguf   qwen35moe: 3 layers, full attention every 2nd
                      (layer 1), so the last (2) is a DeltaNet one; DeltaNet with 2 key heads and
                      4 value heads of 64 (value head h reads key head h % 2); IMROPE sections
                      1,1,1,1 (the fourth pair takes the vision position, 0 for text:
                      unrotated); 8 experts of 16, top 2, a shared expert of 64 with its sigmoid
                      gate; the router at 10x the usual scale (top-2 picks with clear margins: a
                      near tie flips on rounding and is no test of the arithmetic)
    rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16.gguf   the same 3 layers plus one MTP layer,
                      blk.3, with its own MoE FFN (routed experts and the shared one)
  The MTP files' sidecars (make_models.py sidecar) hold their MTP layers alone.
  The DeltaNet heads are 64 wide: ik_llama.cpp's delta rule takes its SIMD path for 64 and 128
  (the widths real models have); its scalar fallback for other widths reads the decay and beta of
  a multi-token batch with the wrong stride. The recurrent parameters keep the state alive:
  ssm_a = -exp(N(0, 0.5)), dt bias around -1 (decay ~0.75 a step). output_norm at 2x: logit std
  ~2 (the other files: ~4); the gated RMSNorm after the delta rule renormalises small outputs, so
  float rounding differences reach the logits larger than elsewhere; at half the logit scale
  both files stay within the F16 tolerance.

  make_models.py bench qwen35: qwen35-mtp1-d2048-l16-Q8_0.gguf shaped as Qwen3.5's ~2B model: 16
    layers of d2048, every 4th gated full attention (8 heads of 256, 2 KV heads, rope on 64), the
    others Gated DeltaNet (16 key and 16 value heads of 128), FFN 6144, plus one MTP layer with
    its FFN (blk.16); ~1.0B weights; one random stream (seed 23).
"""
import gguf_writer as g
import model_file
from weights import NORM, Draw, fan_in, neg_exp, row_scaled, seed_names, table

U32, F32, ARR, I32 = g.T_U32, g.T_F32, g.T_ARR, g.T_I32
KEYS = model_file.keys(("rope.freq_base", F32, "rope_base"),
                       ("rope.dimension_count", U32, "n_rot"),
                       ("rope.dimension_sections", ARR, "sections"),
                       ("ssm.conv_kernel", U32, "d_conv"),
                       ("ssm.inner_size", U32, "inner_size"),
                       ("ssm.state_size", U32, "d_state"),
                       ("ssm.time_step_rank", U32, "dt_rank"),
                       ("ssm.group_count", U32, "n_group"),
                       ("full_attention_interval", U32, "interval"),
                       ("expert_count", U32, "n_expert"),
                       ("expert_used_count", U32, "n_used"),
                       ("expert_feed_forward_length", U32, "ff_exp"),
                       ("expert_shared_feed_forward_length", U32, "ff_shexp"))
TAIL = [("nextn_predict_layers", U32, "n_nextn")]  # after general.file_type

TEST = dict(ctx=4096, d=128, n_head=4, n_kv=2, head_dim=32, n_rot=8, d_conv=4, d_state=64, ff=128,
            eps=1e-6, rope_base=1e7, vocab_size=512, res=0.4, out_scale=2.0, seed=2026,
            wtype=g.GGML_F16)
QWEN35 = dict(TEST, arch="qwen35", n_group=1, dt_rank=2, interval=4, sections=[2, 1, 1, 0])
QWEN35MOE = dict(TEST, arch="qwen35moe", n_group=2, dt_rank=4, interval=2, sections=[1, 1, 1, 1],
                 n_expert=8, n_used=2, ff_exp=16, ff_shexp=64, router_gain=10.0)
TEST_FILES = {
    "rand-qwen35-tok512-d128-l4-F16.gguf":
        dict(QWEN35, n_layer=4, name="rand-qwen35-tok512-d128-l4"),
    # The same 4 layers (the same seeds: the same main-pass logits) plus one MTP layer (blk.4).
    "rand-qwen35-mtp1-tok512-d128-l4-F16.gguf":
        dict(QWEN35, n_layer=5, n_nextn=1, name="rand-qwen35-mtp1-tok512-d128-l4"),
    "rand-qwen35moe-e8x2-tok512-d128-l3-F16.gguf":
        dict(QWEN35MOE, n_layer=3, name="rand-qwen35moe-e8x2-tok512-d128-l3"),
    # The same 3 layers plus an MTP layer with its own MoE FFN (blk.3), as Qwen3.5 MoE's head.
    "rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16.gguf":
        dict(QWEN35MOE, n_layer=4, n_nextn=1, mtp_ffn=True,
             name="rand-qwen35moe-mtp1-e8x2-tok512-d128-l3"),
}

BENCH = {"qwen35": dict(
    QWEN35, ctx=16384, d=2048, ff=6144, n_head=8, n_kv=2, head_dim=256, n_rot=64, d_state=128,
    n_group=16, dt_rank=16, sections=[11, 11, 10, 0], n_layer=17, n_nextn=1, mtp_ffn=True,
    wtype=g.GGML_Q8_0, name="qwen35-mtp1-d2048-l16-Q8_0", stream=23)}


def _layer(h, il, row):
    """The rows of block il: DeltaNet or attention, the MTP head's, the FFN (none in a dense
    model's MTP layer unless h["mtp_ffn"])."""
    p = f"blk.{il}."
    d, hd, r = h["d"], h["head_dim"], 1.0 if il == 0 else h["res"]
    mtp = il >= h["n_layer"] - h.get("n_nextn", 0)
    key_dim, value_dim, dt = h["d_state"] * h["n_group"], h["d_state"] * h["dt_rank"], h["dt_rank"]
    conv_dim = 2 * key_dim + value_dim
    dq, dkv = h["n_head"] * hd, h["n_kv"] * hd
    ssm_a = row(p + "ssm_a", (dt,), 0.5, kind=False)
    delta = [row(p + "attn_qkv.weight", (conv_dim, d), fan_in(d)),
             row(p + "attn_gate.weight", (value_dim, d), fan_in(d)),
             row(p + "ssm_conv1d.weight", (conv_dim, h["d_conv"]), 0.6, kind=False),
             row(p + "ssm_dt.bias", (dt,), 0.3, -1.0, kind=False),
             (ssm_a[0], neg_exp(ssm_a[1]), False),
             row(p + "ssm_beta.weight", (dt, d), fan_in(d)),
             row(p + "ssm_alpha.weight", (dt, d), fan_in(d)),
             row(p + "ssm_norm.weight", (h["d_state"],), *NORM, kind=False),
             row(p + "ssm_out.weight", (d, value_dim), fan_in(value_dim, 1, r))]
    attention = [row(p + "attn_q.weight", (2 * dq, d), fan_in(d, 1.5)),
                 row(p + "attn_k.weight", (dkv, d), fan_in(d)),
                 row(p + "attn_v.weight", (dkv, d), fan_in(d)),
                 row(p + "attn_output.weight", (d, dq), fan_in(dq, 1, r)),
                 row(p + "attn_q_norm.weight", (hd,), 0.3, 1.5, kind=False),
                 row(p + "attn_k_norm.weight", (hd,), 0.3, 1.5, kind=False)]
    head = [row(p + "nextn.eh_proj.weight", (d, 2 * d), fan_in(2 * d)),
            row(p + "nextn.enorm.weight", (d,), *NORM, kind=False),
            row(p + "nextn.hnorm.weight", (d,), *NORM, kind=False),
            row(p + "nextn.shared_head_norm.weight", (d,), *NORM, h["out_scale"], kind=False)]
    if "n_expert" in h:
        e, fe, fs = h["n_expert"], h["ff_exp"], h["ff_shexp"]
        ffn = [row(p + "ffn_gate_inp.weight", (e, d), fan_in(d, h["router_gain"]), kind=False),
               row(p + "ffn_gate_exps.weight", (e, fe, d), fan_in(d)),
               row(p + "ffn_up_exps.weight", (e, fe, d), fan_in(d)),
               row(p + "ffn_down_exps.weight", (e, d, fe), fan_in(fe, 1, r)),
               row(p + "ffn_gate_inp_shexp.weight", (d,), fan_in(d, 2), kind=False),
               row(p + "ffn_gate_shexp.weight", (fs, d), fan_in(d)),
               row(p + "ffn_up_shexp.weight", (fs, d), fan_in(d)),
               row(p + "ffn_down_shexp.weight", (d, fs), fan_in(fs, 1, r))]
    else:
        ff = h["ff"]
        ffn = [row(p + "ffn_gate.weight", (ff, d), fan_in(d)),
               row(p + "ffn_up.weight", (ff, d), fan_in(d)),
               row(p + "ffn_down.weight", (d, ff), fan_in(ff, 1, r))]
    full = (il + 1) % h["interval"] == 0 or mtp
    out = [row(p + "attn_norm.weight", (d,), *NORM, kind=False)] + (attention if full else delta)
    out += [row(p + "post_attention_norm.weight", (d,), *NORM, kind=False)] + (head if mtp else [])
    return out + (ffn if not mtp or h.get("mtp_ffn") else [])


def rows(h):
    """The tensor rows of h, in file order; seed names: the arch, "|", the tensor name without
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
    h = dict(h, inner_size=h["d_state"] * h["dt_rank"], sections=(I32, h["sections"]))
    model_file.write(path, h, KEYS, TAIL, vocab_kv, rows(h), quiet)
