#!/usr/bin/python3
"""Random-weight DFlash block drafters in ik_llama.cpp's `dflash-draft` GGUF schema, and the small
qwen3 target they draft for:

  python3 scripts/models/dflash_draft.py [OUT_DIR] [--shared SHARED_DIR]
  python3 scripts/models/dflash_draft.py --bench TARGET.gguf OUT.gguf [--type f16|q8_0]

writes OUT_DIR (default tests/data/dflash), a rerun the same bytes:
  rand-qwen3-tok512-d128-l4-F16.gguf      the target: scripts/models/arch_qwen3.py's test shape
                                          (seed 2026) narrowed to d128 (4 heads of 32, 2 KV
                                          heads, ffn 256) with 4 layers, tok512's vocabulary
  rand-dflash-qwen3-tok512-d128-l2-b8-F16.gguf
                                          its drafter: 2 layers of d128, block size 8, mask
                                          token 7, target layers [2, 0] (n_target_features 256),
                                          its own rope base 1e6 and the backbone's 1e4; no
                                          token_embd / output (the target's, as the published
                                          drafters share them); tok512's tokenizer keys

--bench writes a timing drafter for any qwen3-style target from its metadata alone, shaped as the
published Qwen3 DFlash drafters (z-lab's Qwen3-8B-DFlash-b16: 5 layers of the target's width, its
heads and FFN, block 16, target layers 1, n/4 + 1, ... spread over the target, mask token 0), one
random stream (seed 16), its tokenizer keys copied from the target.

The schema (ik_llama.cpp's src/llama-arch.cpp, llama-hparams.cpp, llama-load-tensors.cpp):
  general.architecture            dflash-draft
  dflash-draft.dflash.block_size  B > 1: one pass proposes up to B - 1 tokens
  dflash-draft.dflash.mask_token_id     the token of the block's masked rows
  dflash-draft.dflash.target_layer_ids  I32/U32 array, 1..8 distinct target layers whose outputs
                                        feed the drafter (0-based, the residual after layer L)
  dflash-draft.dflash.n_target_features their count x the target's hidden size
  dflash-draft.dflash.backbone_rotary_base   rope base of the context keys (0 or absent: the
                                        drafter's rope.freq_base)
  the llama keys (embedding_length, block_count, feed_forward_length, attention.head_count(_kv),
  key_length, value_length, layer_norm_rms_epsilon, rope.freq_base)
  dflash_fc.weight [n_target_features -> d], dflash_hidden_norm.weight [d], output_norm.weight,
  per layer blk.N.attn_norm, attn_q, attn_k, attn_v, attn_output, attn_q_norm, attn_k_norm,
  post_attention_norm (the FFN's input norm), ffn_gate, ffn_up, ffn_down; optional token_embd,
  output.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import arch_qwen3  # noqa: E402
import gguf_writer as g  # noqa: E402
import model_file  # noqa: E402
from weights import NORM, fan_in, seed_names, table  # noqa: E402

U32, F32, I32 = g.T_U32, g.T_F32, g.T_I32
ARCH = "dflash-draft"

TARGET_NAME = "rand-qwen3-tok512-d128-l4-F16.gguf"
TARGET = dict(arch_qwen3.TEST, n_layer=4, d=128, n_head=4, n_kv=2, head_dim=32, ff=256,
              wtype=g.GGML_F16, name="rand-qwen3-tok512-d128-l4")

DRAFT_NAME = "rand-dflash-qwen3-tok512-d128-l2-b8-F16.gguf"
DRAFT = dict(arch=ARCH, name="rand-dflash-qwen3-tok512-d128-l2-b8", ctx=2048, d=128, n_layer=2,
             ff=256, n_head=4, n_kv=2, head_dim=32, eps=1e-6, rope_base=1e6, block=8, mask=7,
             layers=[2, 0], backbone_base=1e4, wtype=g.GGML_F16, seed=4343)

KEYS = model_file.keys(("rope.freq_base", F32, "rope_base"),
                       ("dflash.block_size", U32, "block"),
                       ("dflash.mask_token_id", U32, "mask"),
                       ("dflash.target_layer_ids", g.T_ARR, "layer_ids"),
                       ("dflash.n_target_features", U32, "n_features"),
                       ("dflash.backbone_rotary_base", F32, "backbone_base"))


def rows(h):
    """The drafter's tensor rows, in file order."""
    row = table(seed_names("dflash/"))
    d, hd, nf = h["d"], h["head_dim"], h["n_features"]
    dq, dkv = h["n_head"] * hd, h["n_kv"] * hd
    out = [row("dflash_fc.weight", (d, nf), fan_in(nf)),
           row("dflash_hidden_norm.weight", (d,), *NORM, kind=False)]
    for il in range(h["n_layer"]):
        p = f"blk.{il}."
        out += [row(p + "attn_norm.weight", (d,), *NORM, kind=False),
                row(p + "attn_q.weight", (dq, d), fan_in(d)),
                row(p + "attn_k.weight", (dkv, d), fan_in(d)),
                row(p + "attn_v.weight", (dkv, d), fan_in(d)),
                row(p + "attn_output.weight", (d, dq), fan_in(dq)),
                row(p + "attn_q_norm.weight", (hd,), 0.3, 1.5, kind=False),
                row(p + "attn_k_norm.weight", (hd,), 0.3, 1.5, kind=False),
                row(p + "post_attention_norm.weight", (d,), *NORM, kind=False),
                row(p + "ffn_gate.weight", (h["ff"], d), fan_in(d)),
                row(p + "ffn_up.weight", (h["ff"], d), fan_in(d)),
                row(p + "ffn_down.weight", (d, h["ff"]), fan_in(h["ff"]))]
    # Peaked logits through the target's output matrix (as the target's own output norm).
    out.append(row("output_norm.weight", (d,), 0.1, 1.0, 4.0, kind=False))
    return out


def write_draft(path, h, vocab_kv):
    h = dict(h, layer_ids=(I32, list(h["layers"])), n_features=len(h["layers"]) * TARGET["d"])
    model_file.write(path, h, KEYS, [], vocab_kv, rows(h))


def write_bench(target, out, wtype):
    """A timing drafter shaped for `target` (its metadata only)."""
    meta = g.read_metadata(target)
    a = meta["general.architecture"][1]
    k = lambda key: meta[f"{a}.{key}"][1]  # noqa: E731
    n = k("block_count")
    layers = [1 + i * (n - 4) // 4 for i in range(5)]  # 1, 9, 17, 25, 33 for 36 layers
    h = dict(arch=ARCH, name="dflash-bench-" + os.path.basename(target).removesuffix(".gguf"),
             ctx=k("context_length"), d=k("embedding_length"), n_layer=5,
             ff=k("feed_forward_length"), n_head=k("attention.head_count"),
             n_kv=k("attention.head_count_kv"),
             # llama files have no key_length: the width over the heads
             head_dim=meta.get(f"{a}.attention.key_length",
                               (0, k("embedding_length") // k("attention.head_count")))[1],
             eps=k("attention.layer_norm_rms_epsilon"), rope_base=k("rope.freq_base"), block=16,
             mask=0, layers=layers, n_features=len(layers) * k("embedding_length"),
             layer_ids=(I32, layers), wtype=wtype, stream=16)
    model_file.write(out, h, KEYS, [], model_file.tokenizer_keys(target), rows(h))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", default=os.path.join(HERE, "../../tests/data/dflash"))
    ap.add_argument("--shared", default=os.path.join(HERE, "../../../shared"))
    ap.add_argument("--bench", nargs=2, metavar=("TARGET", "OUT"))
    ap.add_argument("--type", choices=("f16", "q8_0"), default="q8_0")
    args = ap.parse_args()
    if args.bench:
        write_bench(*args.bench, {"f16": g.GGML_F16, "q8_0": g.GGML_Q8_0}[args.type])
        return
    os.makedirs(args.out, exist_ok=True)
    vocab = model_file.tok512(args.shared)
    arch_qwen3.write(os.path.join(args.out, TARGET_NAME), TARGET, vocab)
    write_draft(os.path.join(args.out, DRAFT_NAME), DRAFT, vocab)


if __name__ == "__main__":
    main()
