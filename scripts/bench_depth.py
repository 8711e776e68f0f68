#!/usr/bin/python3
"""Long contexts side by side (issue 28): Specula's `bench -d N` and ik_llama.cpp's
llama-sweep-bench on the same GGUF file, the same threads and KV cache type, alternating engine by
engine so that a drifting machine hits both alike.

  tg@N         plain decoding after N cached positions, tokens/s
  % of bound   tg@N / (read bandwidth / (weight bytes + KV bytes read per token at N)): the
               bandwidth bound, with the machine's read bandwidth as `specula bench` measures it
  pass b@N     one target pass over b tokens after N positions, ms (Specula; ik_llama.cpp has
               no such measure at depth), and tau(9) = pass 9 / pass 1
  pp512@N      a 512-token prompt pass after N positions, tokens/s
  spec k@N     with --draft-model: speculative decoding with k drafts after N positions against
               plain decoding at the same depth (Specula's own speedup)

usage: scripts/bench_depth.py --specula build/bin/specula MODEL.gguf [--depth 8192]
           [--ctk f16,q8_0] [--ik DIR] [--threads 2] [--rounds 2] [-n 32]
           [--draft-model DRAFT.gguf --draft-k 8]
ik_llama.cpp's llama-sweep-bench is built by `cmake --build build --target llama-sweep-bench` in
its tree (../shared/peers/build.sh builds the others).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"bench_depth.py: {' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return r.stdout + r.stderr


def ik_once(sweep, model, depth, t, n, ctk):
    out = run([sweep, "-m", model, "-c", str(depth + 512), "-ub", "512", "-b", "512", "-n", str(n),
               "-t", str(t), "-ctk", ctk, "-ctv", ctk, "--sweep-stride", str(depth // 512),
               "--output-format", "jsonl"])
    for line in out.splitlines():
        if line.startswith("{") and '"n_kv"' in line:
            row = json.loads(line)
            if row["n_kv"] == depth:
                return {"tg": row["speed_tg"], "pp": row["speed_pp"]}
    sys.exit(f"bench_depth.py: llama-sweep-bench printed no row at n_kv {depth}:\n{out[-2000:]}")


def specula_once(spec, model, depth, t, n, ctk, draft, k):
    with tempfile.TemporaryDirectory() as d:
        j = os.path.join(d, "b.json")
        cmd = [spec, "bench", "-m", model, "-d", str(depth), "--pp", "512", "-n", str(n), "-r", "1",
               "-t", str(t), "--batches", "1,9", "--cache-type-k", ctk, "--cache-type-v", ctk,
               "--json", j]
        cmd += ["-md", draft, "--draft-list", str(k), "--no-auto"] if draft else ["--no-spec"]
        run(cmd)
        res = json.load(open(j))
    th = res["throughput"]
    passes = {p["batch"]: p["ms"] for p in th["passes"]}
    out = {"tg": th["tg_tokens_per_s"], "pp": th["pp_tokens_per_s"], "p1": passes[1],
           "p9": passes[9], "read_gbs": th["read_gb_per_s"], "wbytes": th["bytes_per_token"],
           "kvbytes": th["kv_bytes_per_pass"]}
    if draft:
        spec_row = next(r for r in res["rows"] if r["n"] == str(k))
        out["spec"] = spec_row["median_tokens_per_s"]
        out["acc"] = spec_row["acceptance"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--specula", required=True)
    ap.add_argument("--ik", default=os.environ.get("PEERS_DIR", "/tmp/specula-peers")
                    + "/ik_llama.cpp/src/build/bin")
    ap.add_argument("--depth", type=int, default=8192)
    ap.add_argument("--ctk", default="f16,q8_0")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("-n", type=int, default=32, help="tokens per tg measurement")
    ap.add_argument("--draft-model")
    ap.add_argument("--draft-k", type=int, default=8)
    args = ap.parse_args()
    if args.depth % 512:
        sys.exit("bench_depth.py: --depth must be a multiple of 512 (sweep-bench's ubatch)")
    sweep = os.path.join(args.ik, "llama-sweep-bench")
    if not os.access(sweep, os.X_OK):
        sys.exit(f"bench_depth.py: no llama-sweep-bench in {args.ik}")
    spec = os.path.abspath(args.specula)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    print(f"machine: {cpu}, {os.cpu_count()} cpus; threads {args.threads}; "
          f"{os.path.basename(args.model)} at depth {args.depth}")
    for ctk in args.ctk.split(","):
        runs = {"specula": [], "ik": []}
        for _ in range(args.rounds):
            runs["ik"].append(ik_once(sweep, args.model, args.depth, args.threads, args.n, ctk))
            runs["specula"].append(specula_once(spec, args.model, args.depth, args.threads, args.n,
                                                ctk, args.draft_model, args.draft_k))

        def med(name, key):
            return statistics.median(r[key] for r in runs[name])

        kv = med("specula", "kvbytes")  # the KV rows a 1-token pass reads at the depth
        per_token = med("specula", "wbytes") + kv
        bound = med("specula", "read_gbs") * 1e9 / per_token
        s_tg, k_tg = med("specula", "tg"), med("ik", "tg")
        print(f"\n### KV cache {ctk}: {per_token / 1e9:.2f} GB read per token "
              f"({kv / 1e9:.2f} GB of it KV), bound {bound:.1f} tok/s at "
              f"{med('specula', 'read_gbs'):.1f} GB/s\n")
        print("| measure | specula | ik_llama.cpp | specula / ik |")
        print("|---|---|---|---|")
        print(f"| tg@{args.depth} tok/s | {s_tg:.1f} | {k_tg:.1f} | {s_tg / k_tg:.2f}x |")
        print(f"| % of bound | {100 * s_tg / bound:.0f}% | {100 * k_tg / bound:.0f}% | |")
        s_pp, k_pp = med("specula", "pp"), med("ik", "pp")
        print(f"| pp512@{args.depth} tok/s | {s_pp:.1f} | {k_pp:.1f} | {s_pp / k_pp:.2f}x |")
        p1, p9 = med("specula", "p1"), med("specula", "p9")
        print(f"| pass 1 / 9 @{args.depth} ms | {p1:.2f} / {p9:.2f} | - | tau(9) {p9 / p1:.2f} |")
        if args.draft_model:
            sp = med("specula", "spec")
            print(f"| spec k={args.draft_k}@{args.depth} tok/s | {sp:.1f} "
                  f"(acceptance {med('specula', 'acc'):.2f}) | - | {sp / s_tg:.2f}x plain |")


if __name__ == "__main__":
    main()
