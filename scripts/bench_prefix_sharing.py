#!/usr/bin/env python3
"""Shared prompt prefixes under load (#40 item 3, docs/server-api.md): starts `specula serve`
with and without prefix blocks (--prefix-min-tokens), sends N concurrent completions whose
prompts share one long prefix (an agent's system prompt and tools) and differ in their last
words, and prints the wall time, each run's prompt tokens evaluated (prompt_tokens_total less
prompt_tokens_cached_total from /metrics) and the shared-prefix gauges. Indicative only on a
shared machine.

  scripts/bench_prefix_sharing.py -m models/w-d2048-f5632-l20-Q8_0.gguf -n 8 --prefix-words 400
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z_:]+)(?:\{[^}]*\})? ([0-9.e+-]+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def run(args, min_tokens, port):
    cmd = [args.bin, "serve", "-m", args.model, "--port", str(port), "-t", str(args.threads),
           "--parallel", str(args.n), "-c", str(args.ctx), "--kv-pool", str(args.n * args.ctx),
           "--prefix-min-tokens", str(min_tokens)]
    srv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for line in srv.stderr:
            if "listening" in line:
                break
        threading.Thread(target=lambda: [None for _ in srv.stderr], daemon=True).start()
        prefix = " ".join(["Once upon a time there was a little robot who helped everyone."] *
                          (args.prefix_words // 11))
        tails = ["One day", "The cat", "A bird", "Mom said", "Tom ran", "The sun", "It was",
                 "They saw"]
        replies = [None] * args.n
        t0 = time.time()

        def one(i):
            t = time.time()
            r = post(port, {"prompt": prefix + " " + tails[i % len(tails)] + f" {i}",
                            "max_tokens": args.max_tokens, "temperature": 0})
            replies[i] = (r, time.time() - t)

        ts = [threading.Thread(target=one, args=(i,)) for i in range(args.n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        wall = time.time() - t0
        m = metrics(port)
        evaluated = m.get("specula:prompt_tokens_total", 0) - m.get(
            "specula:prompt_tokens_cached_total", 0)
        n_prompt = sum(r[0]["usage"]["prompt_tokens"] for r in replies)
        texts = [r[0]["choices"][0]["text"] for r in replies]
        return {"min_tokens": min_tokens, "wall_s": round(wall, 2),
                "mean_latency_s": round(sum(r[1] for r in replies) / args.n, 2),
                "prompt_tokens": n_prompt, "evaluated": int(evaluated),
                "shared_positions": m.get("specula:prefix_shared_positions"),
                "hits": m.get("vllm:prefix_cache_hits_total"),
                "queries": m.get("vllm:prefix_cache_queries_total")}, texts
    finally:
        srv.terminate()
        srv.wait()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-m", "--model", required=True)
    p.add_argument("--bin", default=os.path.join(ROOT, "build/bin/specula"))
    p.add_argument("-n", type=int, default=8)
    p.add_argument("-t", "--threads", type=int, default=2)
    p.add_argument("-c", "--ctx", type=int, default=1536)
    p.add_argument("--prefix-words", type=int, default=400)
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--port", type=int, default=18431)
    args = p.parse_args()
    off, off_texts = run(args, 0, args.port)
    on, on_texts = run(args, 64, args.port + 1)
    print(json.dumps(off))
    print(json.dumps(on))
    print("outputs identical:", off_texts == on_texts)
    return 0 if off_texts == on_texts else 1


if __name__ == "__main__":
    sys.exit(main())
