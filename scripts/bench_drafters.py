#!/usr/bin/python3
"""The drafters' costs side by side (issue 43 item 6): one draft step of each drafter against one
target pass, on the ~1B target and on a Qwen3-8B-shaped one (and Gemma 4's assistant on the
Gemma-4-12B-shaped target), and the end-to-end speed at a set acceptance.

  scripts/bench_drafters.py [--quick] [--reps 2] [--threads N] [--k 4] [--accept 0.7]
                            [--only DRAFTER,...] [--targets 1b,8b,gemma4] [--json FILE]

Drafters: a draft model, n-gram prompt lookup, suffix decoding, an EAGLE-3 head, Medusa heads, a
DFlash block drafter, Gemma 4's assistant. The targets must exist (models/, git-ignored):
  models/w-d2048-f5632-l20-Q8_0.gguf    ~1B (../shared/tools/widen_model.py: stories260K widened
                                        to d 2048, 20 layers; 512-token vocabulary)
  models/rand-qwen3-8b-Q4_K_M.gguf      Qwen3-8B-shaped (scripts/models/make_shaped.py)
  models/gemma4-12b-shape-l12-Q8_0.gguf Gemma-4-12B-shaped, 12 of its 48 layers
                                        (scripts/models/make_models.py bench gemma4)
The drafter files are written to models/ when missing, with random weights, by the project's
generators (they need python3 with numpy: this script looks for one):
  eagle3-bench-T-Q8_0.gguf   scripts/models/eagle3_head.py --bench T OUT --type q8_0
  dflash-bench-T-Q8_0.gguf   scripts/models/dflash_draft.py --bench T OUT --type q8_0
  medusa-bench-T-F32.gguf    K heads of one block, no output of their own (the target's: vLLM's
                             layout without lm_heads), a random vLLM checkpoint written here and
                             converted by scripts/models/medusa_convert.py
  gemma4-assistant-bench-12b-Q8_0.gguf  scripts/models/arch_gemma4_assistant.py's write(): 4
                             layers of d 1024 (3 sliding, 1 full), 8 query heads, FFN 4096; a
                             guessed size (no published 12B assistant's shape is used here)
The draft models: ../shared stories260K for the ~1B target (the model it was widened from),
models/rand-qwen3-0.6b-Q8_0.gguf (Qwen3-0.6B-shaped) for the 8B-shaped one.

Per target and drafter, every repetition (the order of targets and drafters alternates from one
repetition to the next), with a private copy of build/bin/specula:
  specula run --spec-type X --draft K --stats-json: draft ms = time_ms.draft / drafts (what the
      drafter costs to propose one draft of up to K tokens, chained steps included), and the
      tokens it proposed per draft. Random weights: almost nothing is accepted, so this is the
      cost of proposing alone (a draft model also catches up on accepted tokens in real use).
  specula bench --synthetic-acceptance A --draft-list K --no-auto: plain tg tok/s, tok/s with
      the drafter where each draft token is accepted with probability A (the output is not the
      target's: a timing study), and one target pass over 1 token (--batches 1).
Columns: draft / pass = draft ms over the pass(1) ms of the bench run next to it, speedup = spec
over plain tok/s of one bench run; each the median of those per-repetition ratios, the other
columns medians over the repetitions. The machine's CPU (from
/proc/cpuinfo), the threads and the load average are printed with the table. On a shared
machine the numbers are indicative.
"""
import argparse
import array
import json
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
MODELS = os.path.join(ROOT, "models")
GEN = os.path.join(ROOT, "scripts", "models")
SHARED = os.environ.get("SPECULA_SHARED_DIR", os.path.join(ROOT, "..", "shared"))
PROMPT = "Once upon a time there was a little girl named Lily. She liked to play"

# name -> target file, its short name, draft model, context, tokens per generation, drafters
TARGETS = {
    "1b": dict(label="~1B (w-d2048-f5632-l20 Q8_0)", file="w-d2048-f5632-l20-Q8_0.gguf",
               short="w-d2048", draft=os.path.join(SHARED, "models/tinystories/stories260K.gguf"),
               ctx=512, n=32,
               drafters=["draft", "ngram", "suffix", "eagle3", "medusa", "dflash"]),
    "8b": dict(label="Qwen3-8B-shaped (Q4_K_M)", file="rand-qwen3-8b-Q4_K_M.gguf",
               short="qwen3-8b", draft=os.path.join(MODELS, "rand-qwen3-0.6b-Q8_0.gguf"),
               ctx=512, n=16,
               drafters=["draft", "ngram", "suffix", "eagle3", "medusa", "dflash"]),
    "gemma4": dict(label="Gemma-4-12B-shaped, 12 of 48 layers (Q8_0)",
                   file="gemma4-12b-shape-l12-Q8_0.gguf", short="gemma4-12b", draft=None,
                   ctx=512, n=16, drafters=["gemma4-assistant"]),
}
# drafter -> (--spec-type, the file it needs: a function of (target, args) or None)
SPEC_TYPE = {"draft": "draft", "ngram": "ngram", "suffix": "suffix", "eagle3": "eagle3",
             "medusa": "medusa", "dflash": "dflash", "gemma4-assistant": "gemma4-assistant"}


def numpy_python():
    """A python3 that imports numpy (the generators need it), or None."""
    for py in (sys.executable, "/usr/bin/python3", "python3"):
        try:
            if subprocess.run([py, "-c", "import numpy"], capture_output=True).returncode == 0:
                return py
        except OSError:
            pass
    return None


def generate(out, cmd):
    """Runs a generator writing `out` unless it exists; False (and why, on stderr) on failure."""
    if os.path.exists(out):
        return True
    py = numpy_python()
    if py is None:
        print(f"bench_drafters.py: no python3 with numpy to write {out}", file=sys.stderr)
        return False
    print(f"bench_drafters.py: writing {out}", file=sys.stderr)
    r = subprocess.run([py] + cmd, cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(out):
        print(f"bench_drafters.py: {' '.join(cmd)} failed:\n{r.stderr[-1500:]}", file=sys.stderr)
        return False
    return True


def read_hidden_size(path):
    """embedding_length from a GGUF file's metadata (stdlib: scripts/models/gguf_writer.py's
    reader needs nothing else)."""
    sys.path.insert(0, GEN)
    import gguf_writer  # noqa: E402  (its metadata reader is standard library only)
    meta = {k: v for k, (_, v) in gguf_writer.read_metadata(path).items()}
    return meta[meta["general.architecture"] + ".embedding_length"]


def random_f32(n, std, rng):
    """n float32 values as bytes: a block of Gaussian draws repeated (timing weights only)."""
    block = array.array("f", (rng.gauss(0.0, std) for _ in range(min(n, 65521)))).tobytes()
    reps, rest = divmod(n, 65521)
    return block * reps + block[:4 * rest]


def write_medusa_checkpoint(ckpt, d, heads):
    """A vLLM-layout Medusa checkpoint (blocks.{i}.layers.0.*, no lm_heads) with random
    weights: config.json and model.safetensors, written with the standard library."""
    rng = random.Random(43)
    tensors = []
    for i in range(heads):
        tensors.append((f"blocks.{i}.layers.0.weight", [d, d], random_f32(d * d, d ** -0.5, rng)))
        tensors.append((f"blocks.{i}.layers.0.bias", [d], random_f32(d, 0.01, rng)))
    header, off = {}, 0
    for name, shape, data in tensors:
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    hb = json.dumps(header).encode()
    hb += b" " * (-len(hb) % 8)
    with open(os.path.join(ckpt, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb)
        for _, _, data in tensors:
            f.write(data)
    with open(os.path.join(ckpt, "config.json"), "w") as f:
        json.dump({"medusa_num_heads": heads, "medusa_num_layers": 1, "hidden_size": d}, f)


def medusa_file(t, a):
    out = os.path.join(MODELS, f"medusa-bench-{t['short']}-k{a.k}-F32.gguf")
    if os.path.exists(out):
        return out
    target = os.path.join(MODELS, t["file"])
    with tempfile.TemporaryDirectory() as ckpt:
        write_medusa_checkpoint(ckpt, read_hidden_size(target), a.k)
        ok = generate(out, [os.path.join(GEN, "medusa_convert.py"), ckpt, target, out,
                            "--type", "f32"])
    return out if ok else None


GEMMA4_ASSISTANT = (
    "import sys; sys.path.insert(0, {gen!r}); import arch_gemma4_assistant as a, model_file, "
    "gguf_writer as g; h = dict(a.BASE, arch='gemma4-assistant', "
    "name='gemma4-assistant-bench-12b', ctx=32768, d=1024, n_layer=4, swa=[1, 1, 1, 0], "
    "n_head=8, n_kv=2, n_kv_swa=8, head_dim=512, head_dim_swa=256, ff=4096, window=1024, "
    "backbone=3840, vocab_size=512, wtype=g.GGML_Q8_0); "
    "a.write({out!r}, h, model_file.tok512({shared!r}))")


def drafter_file(name, t, a):
    """The -md file drafter `name` needs on target t (written when missing), '' for none, None
    when it cannot be had."""
    target = os.path.join(MODELS, t["file"])
    if name == "draft":
        return t["draft"] if os.path.exists(t["draft"]) else None
    if name in ("ngram", "suffix"):
        return ""
    if name == "medusa":
        return medusa_file(t, a)
    if name == "gemma4-assistant":
        out = os.path.join(MODELS, "gemma4-assistant-bench-12b-Q8_0.gguf")
        code = GEMMA4_ASSISTANT.format(gen=GEN, out=out, shared=SHARED)
        return out if generate(out, ["-c", code]) else None
    script = {"eagle3": "eagle3_head.py", "dflash": "dflash_draft.py"}[name]
    out = os.path.join(MODELS, f"{name}-bench-{t['short']}-Q8_0.gguf")
    return out if generate(out, [os.path.join(GEN, script), "--bench", target, out, "--type",
                                 "q8_0"]) else None


def specula(a, args, timeout=900):
    r = subprocess.run([a.specula] + args, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, errors="replace", timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"specula {' '.join(args)} failed:\n{r.stderr[-1500:]}")
    return r.stdout


def spec_args(name, md, a):
    out = ["--spec-type", SPEC_TYPE[name], "--draft", str(a.k)]
    return out + (["-md", md] if md else [])


def measure(t, name, md, a):
    """One repetition of drafter `name` on target t: run (the draft cost) and bench (speed)."""
    target = os.path.join(MODELS, t["file"])
    common = ["-m", target, "-t", str(a.threads), "-c", str(t["ctx"]), "-p", PROMPT,
              "--temp", "0", "-n", str(t["n"])] + spec_args(name, md, a)
    with tempfile.TemporaryDirectory() as d:
        sj, bj = os.path.join(d, "s.json"), os.path.join(d, "b.json")
        specula(a, ["run"] + common + ["--stats-json", sj])
        st = json.load(open(sj))
        specula(a, ["bench"] + common + ["--synthetic-acceptance", str(a.accept), "--draft-list",
                                         str(a.k), "--no-auto", "-r", "1", "--pp", "0",
                                         "--batches", "1", "--json", bj])
        b = json.load(open(bj))
    drafts = st.get("drafts", 0)
    rows = {r["n"]: r for r in b["rows"]}
    spec = rows.get(str(a.k), {})
    return {"draft_ms": st["time_ms"]["draft"] / drafts if drafts else None,
            "per_draft": st["drafted_tokens"] / drafts if drafts else 0.0,
            "drafts_per_pass": drafts / max(1, st["target_passes"]),
            "pass1_ms": [p["ms"] for p in b["throughput"]["passes"] if p["batch"] == 1][0],
            "plain_tps": rows["plain"]["median_tokens_per_s"],
            "spec_tps": spec.get("median_tokens_per_s"),
            "spec_len": spec.get("mean_length")}


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, digits=1, suffix=""):
    return "-" if x is None else f"{x:.{digits}f}{suffix}"


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def table(res, a, loads):
    print(f"CPU: {cpu_name()}, {a.threads} thread(s) of {os.cpu_count()}; load average "
          f"{min(loads):.1f}-{max(loads):.1f} during the run; medians of {a.reps} repetition(s); "
          f"k = {a.k}; end-to-end at --synthetic-acceptance {a.accept}. Indicative.")
    print()
    print("| target | drafter | tokens / draft | draft ms | pass(1) ms | draft / pass | "
          f"plain tok/s | spec tok/s @{a.accept} | speedup | tokens / pass @{a.accept} |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for tkey, per in res.items():
        t = TARGETS[tkey]
        for name, ms in per.items():
            if not ms:
                continue
            # Ratios within one measurement (the draft beside its own pass, spec beside its own
            # plain run), then their median: the machine's load moves both alike.
            ratio = med([m["draft_ms"] / m["pass1_ms"] if m["draft_ms"] is not None else None
                         for m in ms])
            speed = med([m["spec_tps"] / m["plain_tps"] if m["spec_tps"] else None for m in ms])
            print(f"| {t['label']} | {name} | {fmt(med([m['per_draft'] for m in ms]))} | "
                  f"{fmt(med([m['draft_ms'] for m in ms]), 2)} | "
                  f"{fmt(med([m['pass1_ms'] for m in ms]), 1)} | {fmt(ratio, 3)} | "
                  f"{fmt(med([m['plain_tps'] for m in ms]))} | "
                  f"{fmt(med([m['spec_tps'] for m in ms]))} | {fmt(speed, 2, 'x')} | "
                  f"{fmt(med([m['spec_len'] for m in ms]), 2)} |")

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--specula", default=os.path.join(ROOT, "build/bin/specula"))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="one repetition")
    ap.add_argument("--k", type=int, default=4, help="draft length (Medusa: the head count)")
    ap.add_argument("--accept", type=float, default=0.7)
    ap.add_argument("--targets", default="1b,8b,gemma4")
    ap.add_argument("--only", help="comma-separated drafters (default: all)")
    ap.add_argument("--json", help="also write every measurement here")
    a = ap.parse_args()
    if a.quick:
        a.reps = 1
    only = set(a.only.split(",")) if a.only else None
    plan = {}  # target -> [(drafter, its -md file)]
    for tkey in a.targets.split(","):
        if tkey not in TARGETS:
            sys.exit(f"bench_drafters.py: --targets: unknown '{tkey}' (1b, 8b, gemma4)")
        t = TARGETS[tkey]
        if not os.path.exists(os.path.join(MODELS, t["file"])):
            print(f"bench_drafters.py: models/{t['file']} is missing: {tkey} skipped",
                  file=sys.stderr)
            continue
        plan[tkey] = []
        for name in t["drafters"]:
            if only and name not in only:
                continue
            md = drafter_file(name, t, a)
            if md is None:
                print(f"bench_drafters.py: no file for {name} on {tkey}: row left out",
                      file=sys.stderr)
                continue
            plan[tkey].append((name, md))
    res = {tk: {name: [] for name, _ in ds} for tk, ds in plan.items()}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as d:
        # A private copy: a rebuild of build/ during the run must not swap the binary under it.
        shutil.copy2(a.specula, os.path.join(d, "specula"))
        a.specula = os.path.join(d, "specula")
        t0 = time.time()
        for rep in range(a.reps):
            tkeys = list(plan) if rep % 2 == 0 else list(reversed(list(plan)))
            for tkey in tkeys:
                ds = plan[tkey][rep % max(1, len(plan[tkey])):] + \
                    plan[tkey][:rep % max(1, len(plan[tkey]))]
                for name, md in ds:
                    try:
                        m = measure(TARGETS[tkey], name, md, a)
                    except (RuntimeError, subprocess.TimeoutExpired, KeyError, IndexError) as e:
                        print(f"bench_drafters.py: {tkey} {name}: {e}", file=sys.stderr)
                        continue
                    res[tkey][name].append(m)
                    loads.append(os.getloadavg()[0])
                    print(f"rep {rep + 1}/{a.reps} {tkey} {name}: draft "
                          f"{fmt(m['draft_ms'], 2)} ms, pass(1) {m['pass1_ms']:.1f} ms, plain "
                          f"{m['plain_tps']:.1f}, spec {fmt(m['spec_tps'])} tok/s "
                          f"({time.time() - t0:.0f} s)", file=sys.stderr)
    table(res, a, loads)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"cpu": cpu_name(), "threads": a.threads, "loads": loads,
                       "results": res, "args": vars(a)}, f, indent=1)


if __name__ == "__main__":
    main()
