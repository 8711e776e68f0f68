#!/usr/bin/python3
"""The one entry point that writes scripts/models' GGUF files (run with /usr/bin/python3, which has
numpy; `make_models.py SUBCOMMAND --help` lists what each makes):

  arch [OUT_DIR]           the small random-weight files of tests/data/arch (default there) and
                           the sidecars of its MTP files; their JSON references come from
                           make_arch_refs.sh / make_mtp_refs.sh
  bench OUT_DIR --arch A   a random-weight timing target shaped as a real model
  vocab VOCAB OUT          a random-weight qwen3 with the real tokenizer of a vocabulary GGUF
  sidecar MODEL TRUNK SIDECAR   splits a file with MTP layers into its trunk and MTP sidecar

Promises: a rerun writes the same bytes (check_regen.sh checks every file against the committed
ones and the sums in regen.sha256). One module per architecture family (arch_*.py) holds its
keys and tensors as tables; gguf_writer.py writes, weights.py draws, model_file.py assembles.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import arch_deepseek2  # noqa: E402
import arch_gemma  # noqa: E402
import arch_gemma4  # noqa: E402
import arch_gemma4_assistant  # noqa: E402
import arch_glm4moe  # noqa: E402
import arch_nemotron_h  # noqa: E402
import arch_gpt_oss  # noqa: E402
import arch_phi_mistral  # noqa: E402
import arch_qwen3  # noqa: E402
import arch_qwen35  # noqa: E402
import gguf_writer as g  # noqa: E402
import model_file  # noqa: E402
import sidecar  # noqa: E402

FAMILIES = [arch_qwen3, arch_gemma, arch_gemma4, arch_gemma4_assistant, arch_phi_mistral,
            arch_qwen35, arch_gpt_oss, arch_glm4moe, arch_deepseek2, arch_nemotron_h]
BENCH = {arch: (m, h) for m in FAMILIES for arch, h in getattr(m, "BENCH", {}).items()}
DEFAULT_SHARED = os.path.join(HERE, "../../../shared")


def _listing(pairs):
    return "\n".join(f"  {a:<52} {b}" for a, b in pairs)


def cmd_arch(args):
    vocab = model_file.tok512(args.shared)
    os.makedirs(args.out, exist_ok=True)
    for m in FAMILIES:
        for fname, h in m.TEST_FILES.items():
            m.write(os.path.join(args.out, fname), h, vocab)
    for src, car in sidecar.TEST_SIDECARS.items():
        sidecar.split(os.path.join(args.out, src), None, os.path.join(args.out, car))


def cmd_bench(args):
    m, h = BENCH[args.arch]
    os.makedirs(args.out, exist_ok=True)
    m.write(os.path.join(args.out, h["name"] + ".gguf"), h, model_file.tok512(args.shared))


def cmd_vocab(args):
    meta = g.read_metadata(args.vocab)
    if "tokenizer.ggml.tokens" not in meta:
        sys.exit(f"make_models.py vocab: {args.vocab} has no tokenizer.ggml.tokens")
    n_vocab = len(meta["tokenizer.ggml.tokens"][1][1])
    wtype = {"f16": g.GGML_F16, "q8_0": g.GGML_Q8_0}[args.type]
    h = arch_qwen3.vocab_model(args.shape, args.layers, wtype, n_vocab)
    vocab_kv = {k: v for k, v in meta.items() if k.startswith("tokenizer.")}
    arch_qwen3.write(args.out, h, vocab_kv)


def cmd_sidecar(args):
    try:
        sidecar.split(args.model, None if args.trunk == "-" else args.trunk, args.sidecar)
    except sidecar.SplitError as e:
        sys.exit(str(e))


def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    raw = argparse.RawDescriptionHelpFormatter

    arch_files = [(f, m.__name__ + ".py") for m in FAMILIES for f in m.TEST_FILES]
    arch_files += [(car, "sidecar.py (of its MTP file)") for car in sidecar.TEST_SIDECARS.values()]
    p = sub.add_parser("arch", formatter_class=raw, help="the files of tests/data/arch",
                       description="Writes the files of tests/data/arch (each module's docstring "
                       "says what each file tests):\n" + _listing(arch_files))
    p.add_argument("out", nargs="?", default=os.path.join(HERE, "../../tests/data/arch"))
    p.add_argument("--shared", default=DEFAULT_SHARED, help="../shared (for tok512)")
    p.set_defaults(run=cmd_arch)

    p = sub.add_parser("bench", formatter_class=raw, help="a timing target shaped as a real model",
                       description="Writes one random-weight timing target (tok512 vocabulary: "
                       "it pairs with\nthe repository's small drafts and any tokenizer-free "
                       "benchmark, `specula bench`,\n`llama-bench`):\n"
                       + _listing((f"--arch {a}: {h['name']}.gguf", m.__name__ + ".py")
                                  for a, (m, h) in BENCH.items()))
    p.add_argument("out")
    p.add_argument("--arch", default="qwen3moe", choices=sorted(BENCH))
    p.add_argument("--shared", default=DEFAULT_SHARED, help="../shared (for tok512)")
    p.set_defaults(run=cmd_bench)

    p = sub.add_parser("vocab", formatter_class=raw, help="a random qwen3 with a real tokenizer",
                       description="Writes a random-weight qwen3 with the tokenizer.* keys (and "
                       "chat template) of VOCAB,\ne.g. ../shared/vocab/ggml-vocab-qwen3.gguf "
                       "(arch_qwen3.py says more):\n" + _listing(
                           [("vocab VOCAB OUT.gguf --layers 2", "tiny target (agent-loop test)"),
                            ("vocab VOCAB DRAFT.gguf --layers 1", "its block 0 alone: its draft"),
                            ("vocab VOCAB q06b.gguf --shape qwen3-0.6b --type q8_0",
                             "Qwen3-0.6B's shape, for costs")]))
    p.add_argument("vocab", help="a GGUF whose tokenizer.* keys are copied")
    p.add_argument("out")
    p.add_argument("--layers", type=int, default=None, help="default: 2 (tiny), 28 (qwen3-0.6b)")
    p.add_argument("--shape", choices=sorted(arch_qwen3.VOCAB_SHAPES), default="tiny")
    p.add_argument("--type", choices=["f16", "q8_0"], default="f16")
    p.set_defaults(run=cmd_vocab)

    p = sub.add_parser("sidecar", formatter_class=raw, help="split off a file's MTP layers",
                       description=sidecar.__doc__.split("\n\nPromises")[0])
    p.add_argument("model")
    p.add_argument("trunk", help="the trunk's path, or '-': the sidecar only")
    p.add_argument("sidecar")
    p.set_defaults(run=cmd_sidecar)
    return ap


def main():
    args = parser().parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
