#!/usr/bin/python3
"""Side by side on this machine: Specula and ik_llama.cpp's llama-bench on the same GGUF files, the
same threads, alternating engine by engine and repetition by repetition so that a drifting machine
hits both alike. For the architectures of 2026 (issue 23), whose files ../shared/peers/compare.py
does not make: give it the files (e.g. scripts/models/make_models.py bench's).

  tg128       plain decoding, tokens/s       (llama-bench -n 128 | specula bench --no-spec)
  pp512       prompt processing, tokens/s    (llama-bench -p 512)
  pass b      one pass over b tokens, ms     (llama-bench -p b: its pass over b prompt tokens)
  tau(b)      pass b / pass 1: what verifying b-1 draft tokens costs

usage: scripts/bench_arch.py --specula build/bin/specula FILE.gguf [FILE.gguf ...]
           [--ik DIR_WITH_LLAMA_BENCH] [--threads 2] [--reps 3] [--rounds 2] [--ik-fa]
The ratio column is Specula / ik_llama.cpp for tokens/s and ik_llama.cpp / Specula for times
(> 1.00x: Specula is faster).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

PASSES = [1, 5, 9]


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"bench_arch.py: {' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return r.stdout


def ik_once(bench, model, t, reps, pp, fa=False):
    """tokens/s keyed ("tg", 128) / ("pp", n) from one llama-bench run (fa: flash attention on,
    which ik_llama.cpp's gemma4 graph needs to be right)."""
    out = run([bench, "-m", model, "-t", str(t), "-r", str(reps), "-o", "json",
               "-p", ",".join(map(str, PASSES + [pp])), "-n", "128"] + (["-fa", "1"] if fa else []))
    res = {}
    for row in json.loads(out[out.index("["):]):
        key = ("tg", row["n_gen"]) if row["n_gen"] else ("pp", row["n_prompt"])
        res[key] = row["avg_ts"]
    return res


def specula_once(spec, model, t, reps, pp):
    with tempfile.TemporaryDirectory() as d:
        j = os.path.join(d, "b.json")
        run([spec, "bench", "-m", model, "--no-spec", "--pp", str(pp), "-n", "128", "-r",
             str(reps), "-t", str(t), "--batches", ",".join(map(str, PASSES)), "--json", j])
        th = json.load(open(j))["throughput"]
    res = {("tg", 128): th["tg_tokens_per_s"], ("pp", pp): th["pp_tokens_per_s"]}
    for p in th["passes"]:
        res[("pp", p["batch"])] = 1000.0 * p["batch"] / p["ms"]
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--specula", required=True)
    ap.add_argument("--ik", default=os.environ.get("PEERS_DIR", "/tmp/specula-peers")
                    + "/ik_llama.cpp/src/build/bin")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2, help="alternations of the two engines")
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--ik-fa", action="store_true",
                    help="llama-bench -fa 1 (ik_llama.cpp's gemma4 needs flash attention)")
    args = ap.parse_args()
    bench = os.path.join(args.ik, "llama-bench")
    if not os.access(bench, os.X_OK):
        sys.exit(f"bench_arch.py: no llama-bench in {args.ik} (build it: ../shared/peers/build.sh)")
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    print(f"machine: {cpu}, {os.cpu_count()} cpus; threads {args.threads}")
    for model in args.models:
        runs = {"specula": [], "ik": []}
        for _ in range(args.rounds):
            runs["ik"].append(ik_once(bench, model, args.threads, args.reps, args.pp, args.ik_fa))
            runs["specula"].append(specula_once(os.path.abspath(args.specula), model,
                                                args.threads, args.reps, args.pp))

        def tps(name, key):
            vals = [r[key] for r in runs[name] if key in r]
            return statistics.median(vals) if vals else None

        rows = [("tg128 tok/s", ("tg", 128), "hi"), (f"pp{args.pp} tok/s", ("pp", args.pp), "hi")]
        print(f"\n### {os.path.basename(model)} ({os.path.getsize(model) / 1e9:.2f} GB)\n")
        print("| measure | specula | ik_llama.cpp | specula / ik |")
        print("|---|---|---|---|")
        for label, key, _ in rows:
            s, k = tps("specula", key), tps("ik", key)
            print(f"| {label} | {s:.1f} | {k:.1f} | {s / k:.2f}x |")
        ms = {n: {b: 1000.0 * b / tps(n, ("pp", b)) for b in PASSES} for n in runs}
        for b in PASSES:
            s, k = ms["specula"][b], ms["ik"][b]
            print(f"| pass over {b} ms | {s:.2f} | {k:.2f} | {k / s:.2f}x |")
        for b in PASSES[1:]:
            s, k = ms["specula"][b] / ms["specula"][1], ms["ik"][b] / ms["ik"][1]
            print(f"| tau({b}) | {s:.2f} | {k:.2f} | |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
