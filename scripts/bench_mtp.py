#!/usr/bin/python3
"""MTP self-speculation side by side on this machine: Specula and ik_llama.cpp on the same GGUF
file with an MTP (nextn) layer (e.g. scripts/models/make_models.py bench --arch qwen35), the same
threads and prompt, greedy, alternating engine by engine and round by round.

For each draft length k, per engine:
  tok/s     speculative decoding with the model's MTP head   (specula run --spec-type mtp |
            llama-spec-bench --spec-type mtp:n_max=k)
  acc       the acceptance it reached (random weights: ~0, so every round drafts k, verifies k + 1
            and rolls k back: the worst case for rollback)
  step      one MTP head step, ms (the engines' own draft timers / draft steps)
  pass      one target pass over k + 1 tokens, ms, without speculation (specula bench --no-spec
            --batches k+1 | llama-bench -p k+1)
  round     decode time per target pass, ms
  rest      round - pass - k * step: what a round costs beyond its verify pass and its drafts
            (the recurrent state's rollback or checkpoints, sampling, bookkeeping)
Specula's own bench also prints its rollback alone: the pass keeping 1 and k of k + 1 tokens
against the same pass in a session without rollback support.

usage: scripts/bench_mtp.py --specula build/bin/specula FILE.gguf [--ik DIR] [--threads 2]
           [--rounds 2] [--n 64] [--drafts 3,8]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

PROMPT = "Once upon a time there was a little girl named Lily"


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       errors="replace")
    if r.returncode != 0:
        sys.exit(f"bench_mtp.py: {' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return r.stdout


def specula_spec(spec, model, t, n, k):
    with tempfile.TemporaryDirectory() as d:
        j = os.path.join(d, "s.json")
        run([spec, "run", "-m", model, "-t", str(t), "-c", "1024", "--temp", "0", "-p", PROMPT,
             "-n", str(n), "--spec-type", "mtp", "--draft-max", str(k), "--stats-json", j])
        s = json.load(open(j))
    g = s["generation"]
    return dict(tps=g["tokens_per_s"], acc=s["acceptance_rate"], step=s["draft_step_ms"],
                round=g["ms"] / max(1, s["target_passes"]))


def specula_pass(spec, model, t, k):
    with tempfile.TemporaryDirectory() as d:
        j = os.path.join(d, "b.json")
        run([spec, "bench", "-m", model, "--no-spec", "--pp", "0", "-n", "16", "-r", "1", "-t",
             str(t), "--batches", f"1,{k + 1}", "--json", j])
        th = json.load(open(j))["throughput"]
    ms = [p["ms"] for p in th["passes"] if p["batch"] == k + 1][0]
    return ms, th.get("recurrent_rollbacks", [])


def ik_spec(ikdir, model, t, n, k):
    out = run([os.path.join(ikdir, "llama-spec-bench"), "-m", model, "-t", str(t), "-c", "1024",
               "--temp", "0", "-p", PROMPT, "-n", str(n), "--spec-type",
               f"mtp:n_max={k},p_min=0.0", "--output-format", "jsonl"])
    summ = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    summ = [x for x in summ if x.get("row_type") == "summary"][0]
    sp = summ["speculative"]
    gen = summ["generated"]
    passes = gen / max(sp["acceptance_length"], 1e-9)  # tokens per target pass
    return dict(tps=summ["decode_tps"], acc=sp["acceptance_rate"],
                step=1e3 * sp["t_draft_s"] / max(1, sp["draft_tokens"]),
                round=1e3 * summ["decode_s"] / passes)


def ik_pass(ikdir, model, t, k):
    out = run([os.path.join(ikdir, "llama-bench"), "-m", model, "-t", str(t), "-r", "3", "-o",
               "json", "-p", str(k + 1), "-n", "0"])
    row = json.loads(out[out.index("["):])[0]
    return 1e3 * (k + 1) / row["avg_ts"]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--specula", required=True)
    ap.add_argument("--ik", default="/tmp/specula-peers/ik_llama.cpp/src/build/bin")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--drafts", default="3,8")
    a = ap.parse_args()
    ks = [int(x) for x in a.drafts.split(",")]
    res = {(e, k): [] for e in ("specula", "ik") for k in ks}
    rollbacks = {}
    for rnd in range(a.rounds):
        for k in ks:
            s = specula_spec(a.specula, a.model, a.threads, a.n, k)
            s["pass"], rollbacks[k] = specula_pass(a.specula, a.model, a.threads, k)
            res[("specula", k)].append(s)
            i = ik_spec(a.ik, a.model, a.threads, a.n, k)
            i["pass"] = ik_pass(a.ik, a.model, a.threads, k)
            res[("ik", k)].append(i)
            print(f"round {rnd + 1}, k={k}: specula {s['tps']:.1f} tok/s, ik {i['tps']:.1f} tok/s",
                  file=sys.stderr)
    print(f"{os.path.basename(a.model)}, {a.threads} threads, medians of {a.rounds} rounds")
    print("| k | engine | tok/s | acc | MTP step ms | pass(k+1) ms | round ms | rest ms |")
    print("|---|---|---|---|---|---|---|---|")
    for k in ks:
        for e in ("specula", "ik"):
            m = {f: statistics.median(r[f] for r in res[(e, k)])
                 for f in ("tps", "acc", "step", "pass", "round")}
            rest = m["round"] - m["pass"] - k * m["step"]
            print(f"| {k} | {e} | {m['tps']:.1f} | {100 * m['acc']:.0f}% | {m['step']:.2f} | "
                  f"{m['pass']:.1f} | {m['round']:.1f} | {rest:.1f} |")
        for rr in rollbacks[k]:
            print(f"specula rollback, pass b={rr['batch']} keeping {rr['keep']}: "
                  f"{rr['ms']:.2f} ms = {rr['ratio']:.2f}x the pass without rollback support")


if __name__ == "__main__":
    main()
