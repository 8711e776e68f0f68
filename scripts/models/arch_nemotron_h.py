"""The nemotron_h family (NVIDIA Nemotron-H: Mamba-2 SSM mixers, some GQA attention layers without
rope, some squared-ReLU MLP layers): its keys and tensors as tables, and the files made of them.

Each layer is one kind, which the file says through two per-layer arrays, as llama.cpp reads them:
attention.head_count_kv[il] > 0 is an attention layer, feed_forward_length[il] > 0 an MLP layer,
both 0 a Mamba-2 layer. Every layer normalises its input with attn_norm and adds its output to the
residual.

  tests/data/arch (make_models.py arch; seed 2026 per tensor, seed names prefixed "nemotron_h|"):
    rand-nemotron_h-tok512-d128-l6-F16.gguf   6 layers M F M A F M (M Mamba-2, F MLP, A attention;
                      the last a Mamba-2 layer). Mamba-2: conv kernel 4, inner size 128 in 8
                      heads of 16, 2 groups of B/C with a state of 16 (conv_dim 192, ssm_in
                      2 x 128 + 2 x 2 x 16 + 8 = 328 rows); attention: 4 heads of 32, 2 KV heads;
                      MLP 256
    rand-nemotron_h-tok512-d128-l4-Q8_0.gguf  4 layers M A M F (the last an MLP layer), the same
                      shapes, Q8_0 matrices, output_norm at 4x (logits 4x as far apart: the
                      parity test checks the argmax where the top two are over 2 x 0.5 apart)
  Their JSON references come from ref_nemotron_h.py (a float64 numpy forward; no peer engine runs
  nemotron_h), not make_arch_refs.sh. The recurrent parameters keep the state alive: ssm_a =
  -exp(N(0, 0.5)), dt bias around -1 (softplus 0.31: a decay of ~0.75 a step), D around 1.

  make_models.py bench nemotron_h: a Nemotron-H 8B-shaped timing target (BENCH below).
"""
import gguf_writer as g
import model_file
from weights import NORM, Draw, fan_in, neg_exp, row_scaled, seed_names, table

U32, F32, ARR, I32 = g.T_U32, g.T_F32, g.T_ARR, g.T_I32
KEYS = [("context_length", U32, "ctx"),
        ("embedding_length", U32, "d"),
        ("block_count", U32, "n_layer"),
        ("feed_forward_length", ARR, "ff_arr"),
        ("attention.head_count", U32, "n_head"),
        ("attention.head_count_kv", ARR, "kv_arr"),
        ("attention.key_length", U32, "head_dim"),
        ("attention.value_length", U32, "head_dim"),
        ("attention.layer_norm_rms_epsilon", F32, "eps"),
        ("ssm.conv_kernel", U32, "d_conv"),
        ("ssm.inner_size", U32, "d_inner"),
        ("ssm.state_size", U32, "d_state"),
        ("ssm.time_step_rank", U32, "n_ssm_head"),
        ("ssm.group_count", U32, "n_group"),
        ("vocab_size", U32, "vocab_size")]

TEST = dict(arch="nemotron_h", ctx=4096, d=128, n_head=4, n_kv=2, head_dim=32, ff=256, eps=1e-5,
            d_conv=4, d_inner=128, d_state=16, n_ssm_head=8, n_group=2, vocab_size=512, res=0.4,
            seed=2026)
TEST_FILES = {
    "rand-nemotron_h-tok512-d128-l6-F16.gguf":
        dict(TEST, pattern="MFMAFM", wtype=g.GGML_F16, name="rand-nemotron_h-tok512-d128-l6"),
    "rand-nemotron_h-tok512-d128-l4-Q8_0.gguf":
        dict(TEST, pattern="MAMF", wtype=g.GGML_Q8_0, out_scale=4.0,
             name="rand-nemotron_h-tok512-d128-l4"),
}

# make_models.py bench nemotron_h: Nemotron-H 8B's shapes (d4096; Mamba-2 with 128 heads of 64
# (d_inner 8192), 8 groups of B/C with a state of 128, conv 4; attention of 32 heads of 128, 8 KV
# heads; MLP 21504) with 6 of its 52 layers, M F M A F M (~0.72B weights, Q8_0 ~0.77 GB), and the
# tok512 vocabulary; one random stream (seed 31). No peer engine runs it (llama-bench of
# ik_llama.cpp has no Mamba-2): a timing target for `specula bench` alone.
BENCH = {"nemotron_h": dict(
    TEST, ctx=8192, d=4096, n_head=32, n_kv=8, head_dim=128, ff=21504, d_inner=8192, d_state=128,
    n_ssm_head=128, n_group=8, res=1.0, pattern="MFMAFM", wtype=g.GGML_Q8_0,
    name="nemotron_h-8b-d4096-l6-Q8_0", stream=31)}


def _mamba2(h, p, row, r):
    d, di, ds, ng, nh = h["d"], h["d_inner"], h["d_state"], h["n_group"], h["n_ssm_head"]
    conv_dim = di + 2 * ng * ds
    ssm_a = row(p + "ssm_a", (nh, 1), 0.5, kind=False)
    return [row(p + "ssm_in.weight", (2 * di + 2 * ng * ds + nh, d), fan_in(d)),
            row(p + "ssm_conv1d.weight", (conv_dim, h["d_conv"]), 0.5, kind=False),
            row(p + "ssm_conv1d.bias", (conv_dim,), 0.1, kind=False),
            row(p + "ssm_dt.bias", (nh,), 0.3, -1.0, kind=False),
            (ssm_a[0], neg_exp(ssm_a[1]), False),
            row(p + "ssm_d", (nh, 1), 0.3, 1.0, kind=False),
            row(p + "ssm_norm.weight", (ng, di // ng), *NORM, kind=False),
            row(p + "ssm_out.weight", (d, di), fan_in(di, 1, r))]


def _layer(h, il, row):
    """The rows of block il: attn_norm, then the tensors of its kind."""
    p = f"blk.{il}."
    d, hd, r = h["d"], h["head_dim"], 1.0 if il == 0 else h["res"]
    dq, dkv = h["n_head"] * hd, h["n_kv"] * hd
    kind = h["pattern"][il]
    out = [row(p + "attn_norm.weight", (d,), *NORM, kind=False)]
    if kind == "M":
        return out + _mamba2(h, p, row, r)
    if kind == "A":
        return out + [row(p + "attn_q.weight", (dq, d), fan_in(d, 1.5)),
                      row(p + "attn_k.weight", (dkv, d), fan_in(d)),
                      row(p + "attn_v.weight", (dkv, d), fan_in(d)),
                      row(p + "attn_output.weight", (d, dq), fan_in(dq, 1, r))]
    ff = h["ff"]
    return out + [row(p + "ffn_up.weight", (ff, d), fan_in(d)),
                  row(p + "ffn_down.weight", (d, ff), fan_in(ff, 0.7, r))]


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
    out += [row("output_norm.weight", (d,), *NORM, h.get("out_scale", 1.0), kind=False),
            ("output.weight", row_scaled(head, sd("output.rownorm"), 0.25), True)]
    return out


def write(path, h, vocab_kv, quiet=False):
    pat = h["pattern"]
    h = dict(h, n_layer=len(pat),
             ff_arr=(I32, [h["ff"] if k == "F" else 0 for k in pat]),
             kv_arr=(I32, [h["n_kv"] if k == "A" else 0 for k in pat]))
    model_file.write(path, h, KEYS, [], vocab_kv, rows(h), quiet)
