#!/usr/bin/python3
"""Medusa heads from a Hugging Face / vLLM checkpoint to Specula's `medusa` GGUF:

  python3 scripts/models/medusa_convert.py CHECKPOINT_DIR TARGET.gguf OUT.gguf [--type f32|f16]

CHECKPOINT_DIR holds config.json and the heads' safetensors (model.safetensors, or every
*.safetensors file in it: medusa_lm_head.safetensors is the usual name). Two tensor layouts are
read:
  Hugging Face (FasterDecoding/Medusa): medusa_head.{i}.{j}.linear.weight / .bias for block j < L
      of head i, and medusa_head.{i}.{L}.weight, the head's output matrix
  vLLM (MedusaConfig): blocks.{i}.layers.{j}.weight / .bias, and lm_heads.{i}.weight (absent: the
      heads share the target's output matrix)
config.json gives the head count (medusa_num_heads / num_heads), the blocks per head
(medusa_num_layers / num_hidden_layers) and the hidden size (hidden_size), each checked against
the tensors and the target (its embedding_length and vocabulary, read from TARGET.gguf's
metadata). The layout written (docs/speculative.md, src/speculative/drafters/medusa_head.h):
  general.architecture "medusa", medusa.head_count, medusa.block_count, medusa.embedding_length,
  medusa.vocab_size; medusa.{i}.blk.{j}.weight [d x d] and .bias [d] (F32), medusa.{i}.output.weight
  [d x n_vocab] when the head has its own (--type: F32 or F16, default F16).
safetensors is read by hand (an 8-byte header length, a JSON header of name -> dtype, shape,
data_offsets; F32, F16 and BF16 data). Standard library + numpy only.
"""
import argparse
import glob
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_writer as g  # noqa: E402

MAX_HEADS = 16


def read_safetensors(path):
    """name -> float64 array (F32, F16, BF16)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        sys.exit(f"{path}: not a safetensors file (shorter than its 8-byte header length)")
    (n,) = struct.unpack_from("<Q", raw, 0)
    if 8 + n > len(raw):
        sys.exit(f"{path}: header length {n} runs past the file ({len(raw)} bytes)")
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        buf = data[a:b]
        dt = info["dtype"]
        if dt == "F32":
            arr = np.frombuffer(buf, "<f4")
        elif dt == "F16":
            arr = np.frombuffer(buf, "<f2")
        elif dt == "BF16":
            arr = (np.frombuffer(buf, "<u2").astype(np.uint32) << 16).view("<f4")
        else:
            sys.exit(f"{path}: tensor '{name}' has dtype {dt}; F32, F16 and BF16 are read")
        out[name] = arr.astype(np.float64).reshape(info["shape"])
    return out


def write_safetensors(path, tensors):
    """name -> array, written as F32 (the test checkpoints)."""
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        b = np.ascontiguousarray(arr, "<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def config_int(cfg, path, *names):
    for n in names:
        if n in cfg:
            return int(cfg[n])
    sys.exit(f"{path}: none of the keys {', '.join(names)}")


def heads_from_checkpoint(ckpt):
    """(heads, blocks, d, [(blocks [(W, b)], output or None)]) from the checkpoint directory."""
    cfg_path = os.path.join(ckpt, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    n_heads = config_int(cfg, cfg_path, "medusa_num_heads", "num_heads")
    n_blocks = config_int(cfg, cfg_path, "medusa_num_layers", "num_hidden_layers")
    d = config_int(cfg, cfg_path, "hidden_size")
    if not 1 <= n_heads <= MAX_HEADS:
        sys.exit(f"{cfg_path}: medusa_num_heads is {n_heads}, must be in [1, {MAX_HEADS}]")
    t = {}
    for p in sorted(glob.glob(os.path.join(ckpt, "*.safetensors"))):
        t.update(read_safetensors(p))
    if not t:
        sys.exit(f"{ckpt}: no *.safetensors file")
    hf = any(k.startswith("medusa_head.") for k in t)
    heads = []
    for i in range(n_heads):
        blocks = []
        for j in range(n_blocks):
            w, b = ((f"medusa_head.{i}.{j}.linear.weight", f"medusa_head.{i}.{j}.linear.bias") if hf
                    else (f"blocks.{i}.layers.{j}.weight", f"blocks.{i}.layers.{j}.bias"))
            for name, shape in ((w, (d, d)), (b, (d,))):
                if name not in t:
                    sys.exit(f"{ckpt}: missing tensor '{name}' (head {i}, block {j})")
                if t[name].shape != shape:
                    sys.exit(f"{ckpt}: tensor '{name}' is {list(t[name].shape)}, expected "
                             f"{list(shape)} (hidden_size {d} in {cfg_path})")
            blocks.append((t[w], t[b]))
        out = t.get(f"medusa_head.{i}.{n_blocks}.weight" if hf else f"lm_heads.{i}.weight")
        if hf and out is None:
            sys.exit(f"{ckpt}: missing tensor 'medusa_head.{i}.{n_blocks}.weight' (head {i}'s "
                     "output matrix)")
        heads.append((blocks, out))
    if f"medusa_head.{n_heads}.0.linear.weight" in t or f"blocks.{n_heads}.layers.0.weight" in t:
        sys.exit(f"{ckpt}: the tensors hold more heads than medusa_num_heads {n_heads}")
    return n_heads, n_blocks, d, heads


def target_shape(path):
    meta = {k: v for k, (_, v) in g.read_metadata(path).items()}
    a = meta["general.architecture"]
    d = meta[a + ".embedding_length"]
    tokens = meta["tokenizer.ggml.tokens"]  # (element type, values)
    vocab = meta.get(a + ".vocab_size") or len(tokens[1] if isinstance(tokens, tuple) else tokens)
    return d, vocab


def convert(ckpt, target, out, otype=g.GGML_F16, name=None):
    n_heads, n_blocks, d, heads = heads_from_checkpoint(ckpt)
    td, vocab = target_shape(target)
    if d != td:
        sys.exit(f"{ckpt}/config.json: hidden_size is {d}, the embedding_length of {target} is {td}")
    w = g.Writer()
    w.add("general.architecture", g.T_STR, "medusa")
    w.add("general.name", g.T_STR,
          name or "Medusa heads from " + os.path.basename(os.path.abspath(ckpt)))
    for key, val in (("head_count", n_heads), ("block_count", n_blocks), ("embedding_length", d),
                     ("vocab_size", vocab)):
        w.add("medusa." + key, g.T_U32, val)
    for i, (blocks, o) in enumerate(heads):
        for j, (wm, b) in enumerate(blocks):
            w.tensor(f"medusa.{i}.blk.{j}.weight", wm, g.GGML_F32)
            w.tensor(f"medusa.{i}.blk.{j}.bias", b, g.GGML_F32)
        if o is not None:
            if o.shape != (vocab, d):
                sys.exit(f"{ckpt}: head {i}'s output matrix is {list(o.shape)}, expected "
                         f"[{vocab}, {d}] (the vocabulary of {target})")
            w.tensor(f"medusa.{i}.output.weight", o, otype)
    w.write(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("target")
    ap.add_argument("out")
    ap.add_argument("--type", choices=["f32", "f16"], default="f16")
    a = ap.parse_args()
    convert(a.checkpoint, a.target, a.out, g.GGML_F32 if a.type == "f32" else g.GGML_F16)


if __name__ == "__main__":
    main()
