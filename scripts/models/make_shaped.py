#!/usr/bin/python3
"""Random-weight qwen3 files shaped as real models, with a real vocabulary, for benchmarks at real
sizes (issue 40): never in CI, written to models/ (git-ignored) by default.

  make_shaped.py [--shape qwen3-8b|qwen3-0.6b|all] [--vocab VOCAB.gguf] [--out DIR]
                 [--quant Q8_0,Q4_K_M] [--specula build/bin/specula] [--keep-f16]

  qwen3-8b    36 layers of d4096, 32 heads of 128 (8 KV heads), FFN 12288, an untied output:
              8.2B weights, 16.4 GB in F16
  qwen3-0.6b  28 layers of d1024, 16 heads of 128 (8 KV heads), FFN 3072, output tied to
              token_embd: 0.6B weights, 1.2 GB in F16 (the draft)

Both take the tokenizer.* keys of VOCAB (default ../shared/vocab/ggml-vocab-qwen3.gguf: Qwen3's
151,936-token vocabulary) and so share it. The F16 file is written as it is drawn, one tensor at
a time (the largest, token_embd, needs ~4 GB of RAM), then `specula quantize` makes each --quant
type from it. Weights: one seeded stream (make_models.py's Stream), N(0, 1/fan_in); norms around
1. A rerun writes the same bytes. Files already there are kept (delete them to remake).
"""
import argparse
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import arch_qwen3  # noqa: E402
import gguf_writer as g  # noqa: E402
import model_file  # noqa: E402
import weights  # noqa: E402

ROOT = os.path.abspath(os.path.join(HERE, "../.."))
SHAPES = {
    "qwen3-8b": dict(d=4096, n_layer=36, n_head=32, n_kv=8, head_dim=128, ff=12288,
                     output="plain", stream=8008),
    "qwen3-0.6b": dict(d=1024, n_layer=28, n_head=16, n_kv=8, head_dim=128, ff=3072,
                       output="tied", stream=6006),
}


def hparams(shape, n_vocab):
    return dict(SHAPES[shape], arch="qwen3", name=f"rand-{shape}", ctx=40960, eps=1e-6,
                rope_base=1e6, n_vocab=n_vocab, res=1.0, qk_norm=(0.1, 1.0),
                out_norm=(0.1, 1.0, 1.0), wtype=g.GGML_F16)


def shape_of(v):
    if isinstance(v, weights.Draw):
        return v.shape
    raise ValueError("make_shaped.py: a row without a Draw shape")


def header(h, vocab_kv, rows):
    """The GGUF header (keys as model_file.write orders them) for rows written in order."""
    kv = [("general.architecture", g.T_STR, h["arch"]), ("general.name", g.T_STR, h["name"])]
    kv += model_file.arch_keys(arch_qwen3.KEYS, h)
    kv += [(k, t, v) for k, (t, v) in vocab_kv.items()]
    kv += [("general.quantization_version", g.T_U32, 2), ("general.file_type", g.T_U32, 1)]
    head = struct.pack("<4sIQQ", b"GGUF", 3, len(rows), len(kv))
    head += b"".join(g._str(k) + struct.pack("<I", t) + g._val(t, v) for k, t, v in kv)
    off, infos = 0, []
    for name, v, matrix in rows:
        shape = shape_of(v)
        gtype, size = (g.GGML_F16, 2) if matrix else (g.GGML_F32, 4)
        n = 1
        for s in shape:
            n *= s
        ne = list(reversed(shape))
        infos.append(g._str(name) + struct.pack(f"<I{len(ne)}QIQ", len(ne), *ne, gtype, off))
        off += (n * size + g.ALIGN - 1) // g.ALIGN * g.ALIGN
    head += b"".join(infos)
    return head + b"\0" * (-len(head) % g.ALIGN)


def write_f16(path, h, vocab_kv):
    rows = arch_qwen3.rows(h)
    gen = weights.generator(h)
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        f.write(header(h, vocab_kv, rows))
        for i, (name, v, matrix) in enumerate(rows):
            arr = weights.value(gen, v)
            data = arr.astype("<f2" if matrix else "<f4").tobytes()
            del arr
            f.write(data)
            f.write(b"\0" * (-len(data) % g.ALIGN))
            print(f"\r  {i + 1}/{len(rows)} {name:<32}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="all", choices=[*SHAPES, "all"])
    ap.add_argument("--vocab", default=os.path.join(ROOT, "../shared/vocab/ggml-vocab-qwen3.gguf"))
    ap.add_argument("--out", default=os.path.join(ROOT, "models"))
    ap.add_argument("--quant", default="Q4_K_M,Q8_0",
                    help="types for `specula quantize` ('': none)")
    ap.add_argument("--specula", default=os.path.join(ROOT, "build/bin/specula"))
    ap.add_argument("--threads", default=str(os.cpu_count() or 1))
    ap.add_argument("--keep-f16", action="store_true", help="keep the F16 file after quantizing")
    a = ap.parse_args()
    meta = g.read_metadata(a.vocab)
    if "tokenizer.ggml.tokens" not in meta:
        sys.exit(f"make_shaped.py: {a.vocab} has no tokenizer.ggml.tokens")
    vocab_kv = {k: v for k, v in meta.items() if k.startswith("tokenizer.")}
    n_vocab = len(meta["tokenizer.ggml.tokens"][1][1])
    os.makedirs(a.out, exist_ok=True)
    quants = [q for q in a.quant.split(",") if q]
    for shape in SHAPES if a.shape == "all" else [a.shape]:
        stem = os.path.join(a.out, f"rand-{shape}")
        f16 = stem + "-F16.gguf"
        todo = [q for q in quants if not os.path.exists(f"{stem}-{q}.gguf")]
        if not os.path.exists(f16) and (todo or a.keep_f16 or not quants):
            print(f"{f16}: drawing {shape} (vocab {n_vocab})", file=sys.stderr)
            write_f16(f16, hparams(shape, n_vocab), vocab_kv)
        for q in todo:
            subprocess.run([a.specula, "quantize", "-q", f16, f"{stem}-{q}.gguf", q, a.threads],
                           check=True)
        if quants and not a.keep_f16 and os.path.exists(f16):
            os.remove(f16)
        for q in quants:
            print(f"{stem}-{q}.gguf", os.path.getsize(f"{stem}-{q}.gguf"), "bytes")


if __name__ == "__main__":
    main()
