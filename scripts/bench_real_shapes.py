#!/usr/bin/python3
"""Real shapes side by side (issue 40 item 4): Specula's `bench` and ik_llama.cpp's llama-bench on
the same GGUF files, e.g. the Qwen3-8B-shaped random-weight target and its Qwen3-0.6B-shaped
draft that scripts/models/make_shaped.py writes to models/. Rows:

  tg128         plain decoding, tokens/s
  pp512         a 512-token prompt, tokens/s
  pp512@D, tg@D the same after D cached positions (--depth D, a multiple of 512; ik_llama.cpp:
                its llama-sweep-bench's row at D, -ub 512, tg of 32 tokens, when the --ik folder
                has it: `cmake --build . --target llama-sweep-bench` in its build folder)
  pass b        one target pass over b = 1, 5, 9 tokens, ms (ik_llama.cpp: its pp1/pp5/pp9), and
                tau(9) = pass 9 / pass 1: Specula's as `bench` prints it (the median of each
                round's ratio, the two passes timed in turn), ik_llama.cpp's the ratio of its
                medians (llama-bench times each size on its own)
  load          Specula's load time (`run`'s "load:"), ms, and for both engines the wall time of
                a whole 1-token `run` / llama-cli (-c 4096), ms, the file read into the page
                cache just before each run; 5 pairs of runs, the engines in turn: medians, and
                the ratio the median of each pair's (the machine's drift cancels within a pair);
                with --repack-cache DIR the same for Specula mapping its packed cache file
                (written by one untimed run first; the file is as large as the packed weights)
  RSS           peak resident memory of the tg/pp run, MiB (both map the file: its pages count)
  spec k@a      with --draft: speculative decoding with k drafts at a synthetic acceptance a
                (`--synthetic-acceptance`), Specula's speedup over its own plain decoding, and the
                speedup its cost model predicts from the measured pass and draft costs

usage: scripts/bench_real_shapes.py MODEL.gguf [--draft DRAFT.gguf] [--specula build/bin/specula]
           [--ik DIR] [--threads 2] [--reps 1] [--depth 0] [--accept 0.7] [--k 4]
           [--repack-cache DIR] [--json FILE]
The machine is usually shared: run nothing else meanwhile and say how noisy it was.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
IK_DEFAULT = "/tmp/specula-peers/ik_llama.cpp/src/build/bin"


def run(cmd, timeout=3600, must=None):
    """stdout + stderr of cmd under /usr/bin/time -v, and its peak RSS in MiB. A failed command
    ends the script, unless its output has the text `must` (what is read from it). It runs in a
    temporary folder: llama-cli writes its main.log into the current one."""
    full = ["/usr/bin/time", "-v"] + cmd
    with tempfile.TemporaryDirectory() as cwd:
        r = subprocess.run(full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=timeout, cwd=cwd)
    if r.returncode != 0 and not (must and must in r.stdout + r.stderr):
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stderr[-1500:]}")
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    return r.stdout + r.stderr, (int(m.group(1)) / 1024 if m else float("nan"))


def wall_ms(out):
    """The wall time /usr/bin/time -v printed, ms."""
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): "
                  r"(?:(\d+):)?(\d+):([\d.]+)", out)
    if not m:
        return float("nan")
    return 1000 * (3600 * int(m.group(1) or 0) + 60 * int(m.group(2)) + float(m.group(3)))


def specula_plain(a, model, depth, n, batches):
    with tempfile.TemporaryDirectory() as d:
        j = os.path.join(d, "b.json")
        out, rss = run([a.specula, "bench", "-m", model, "--no-spec", "-n", str(n), "--pp", "512",
                        "-r", str(a.reps), "-t", str(a.threads), "-d", str(depth),
                        "--batches", batches, "--json", j])
        th = json.load(open(j))["throughput"]
    passes = {p["batch"]: p["ms"] for p in th["passes"]}
    taus = {p["batch"]: p["tau"] for p in th["passes"]}
    return {"tg": th["tg_tokens_per_s"], "pp": th["pp_tokens_per_s"], "passes": passes,
            "tau9": taus.get(9), "rss": rss}


def warm(path):
    """Reads the file once, so that a load timed next finds it in the page cache (on a machine
    whose RAM barely holds two 8B files and a packed copy, the previous step may have evicted
    part of it: the first load after the other file ran was 1.5-2x slower on both engines)."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


LOAD_PAIRS = 5  # the 1-token runs: this many pairs, Specula's run and ik_llama.cpp's in turn


def specula_run_cmd(a, model):
    return [a.specula, "run", "-m", model, "-p", "Hello", "-n", "1", "--temp", "0", "-c", "4096",
            "-t", str(a.threads)]


def ik_run_cmd(a, model):
    return [os.path.join(a.ik, "llama-cli"), "-m", model, "-p", "Hello", "-n", "1", "--temp", "0",
            "-c", "4096", "-t", str(a.threads)]


def loads(a, model):
    """The 1-token runs, timed in pairs: Specula's `run`, then (with --ik) llama-cli's, the file
    read into the page cache just before each, LOAD_PAIRS times. This machine's speed drifts by up
    to 2x over seconds, so a ratio is taken within each pair (the two runs seconds apart) and the
    row is the median of those ratios, beside the median of each engine's wall times (its own
    `load:` too for Specula). Returns ({"load": (load ms, wall ms)}, {"load": wall ms},
    median ratio ik / Specula or None)."""
    spec_out, ik_walls, ratios = [], [], []
    for _ in range(LOAD_PAIRS):
        warm(model)
        spec_out.append(run(specula_run_cmd(a, model), must="load: ")[0])
        if a.ik:
            warm(model)
            ik_walls.append(wall_ms(run(ik_run_cmd(a, model), must="total time")[0]))
            ratios.append(ik_walls[-1] / wall_ms(spec_out[-1]))
    own = [float(m.group(1)) if (m := re.search(r"load: (\d+) ms", o)) else float("nan")
           for o in spec_out]
    return ({"load": (median(own), median([wall_ms(o) for o in spec_out]))},
            {"load": median(ik_walls)} if ik_walls else {},
            median(ratios) if ratios else None)


def specula_load_cached(a, model):
    """The 1-token run with --repack-cache: one run writes the cache, the next one is timed."""
    cmd = specula_run_cmd(a, model) + ["--repack-cache", a.repack_cache]
    run(cmd, must="load: ")
    out, _ = run(cmd, must="load: ")
    m = re.search(r"load: (\d+) ms", out)
    return (float(m.group(1)) if m else float("nan")), wall_ms(out)


def ik_depth(a, model):
    """ik_llama.cpp's llama-sweep-bench row at --depth: pp512 and tg32 tok/s, or None."""
    sweep = os.path.join(a.ik, "llama-sweep-bench")
    if not os.path.exists(sweep):
        return None
    out, _ = run([sweep, "-m", model, "-c", str(a.depth + 512), "-ub", "512", "-b", "512",
                  "-n", "32", "-t", str(a.threads), "--sweep-stride", str(a.depth // 512)],
                 must="|")
    for line in out.splitlines():
        f = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(f) >= 7 and f[2] == str(a.depth):
            return {"pp": float(f[4]), "tg": float(f[6])}
    return None


def specula_spec(a, model):
    k = str(a.k)
    out, _ = run([a.specula, "bench", "-m", model, "-md", a.draft, "--synthetic-acceptance",
                  str(a.accept), "--draft-list", k, "--no-auto", "-n", "64", "-r", str(a.reps),
                  "--pp", "0", "--batches", f"1,{a.k + 1}", "-t", str(a.threads)])
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0].rstrip("*") == k and len(cells) >= 7:
            return {"speedup": float(cells[5].rstrip("x")), "model": float(cells[6].rstrip("x")),
                    "tps": float(cells[4])}
    raise RuntimeError(f"no row for k={k} in:\n{out[-1500:]}")


def ik_bench(a, model, extra):
    out, rss = run([os.path.join(a.ik, "llama-bench"), "-m", model, "-t", str(a.threads),
                    "-r", str(a.reps), "-o", "json"] + extra)
    rows = json.loads(out[out.index("["):out.rindex("]") + 1])
    return rows, rss


def ik_plain(a, model):
    rows, rss = ik_bench(a, model, ["-p", "512", "-n", "128"])
    res = {"rss": rss}
    for r in rows:
        res["pp" if r["n_prompt"] else "tg"] = r["avg_ts"]
    rows, _ = ik_bench(a, model, ["-p", "1,5,9", "-n", "0"])
    res["passes"] = {r["n_prompt"]: 1000.0 * r["n_prompt"] / r["avg_ts"] for r in rows}
    return res


def fmt(x, digits=1):
    return "-" if x is None or x != x else f"{x:.{digits}f}"


def table(s, ik, a):
    rows = [("tg128 tok/s", s.get("tg"), ik.get("tg"), True),
            ("pp512 tok/s", s.get("pp"), ik.get("pp"), True)]
    if "depth" in s:
        d = ik.get("depth") or {}
        rows += [(f"pp512@{a.depth} tok/s", s["depth"]["pp"], d.get("pp"), True),
                 (f"tg@{a.depth} tok/s", s["depth"]["tg"], d.get("tg"), True)]
    for b in (1, 5, 9):
        rows.append((f"pass {b} ms", s["passes"].get(b), ik.get("passes", {}).get(b), False))
    tau = lambda p: p.get(9, 0) / p[1] if p and p.get(1) else None  # noqa: E731
    rows.append(("tau(9) (Specula's paired, as `bench` prints it)", s.get("tau9"),
                 tau(ik.get("passes")), False))
    load = s.get("load", (None, None))
    rows += [("load ms (Specula's own)", load[0], None, False),
             ("1-token run, wall ms (ratio: median of paired runs)", load[1], ik.get("load"),
              False, s.get("load_ratio"))]
    if "load_cached" in s:
        rows += [("load ms, --repack-cache mapped", s["load_cached"][0], None, False),
                 ("1-token run, wall ms, --repack-cache", s["load_cached"][1], ik.get("load"),
                  False)]
    rows += [
             ("RSS MiB", s.get("rss"), ik.get("rss"), False)]
    print(f"| {os.path.basename(a.model)} | Specula | ik_llama.cpp | Specula / ik |")
    print("|---|---|---|---|")
    for name, x, y, higher, *paired in rows:
        ratio = (x / y if higher else y / x) if x and y else None
        if paired and paired[0]:
            ratio = paired[0]
        print(f"| {name} | {fmt(x, 2)} | {fmt(y, 2)} | {fmt(ratio, 2)}{'x' if ratio else ''} |")
    if "spec" in s:
        sp = s["spec"]
        print(f"| spec k={a.k} @ a={a.accept} (draft {os.path.basename(a.draft)}) | "
              f"{sp['tps']:.2f} tok/s, {sp['speedup']:.2f}x | - | cost model: "
              f"{sp['model']:.2f}x |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--draft")
    ap.add_argument("--specula", default=os.path.join(ROOT, "build/bin/specula"))
    ap.add_argument("--ik", default=IK_DEFAULT, help="ik_llama.cpp's bin folder ('': skip it)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--depth", type=int, default=0, help="also measure after this many positions")
    ap.add_argument("--accept", type=float, default=0.7)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--repack-cache", help="also time Specula's load mapping a cache in this folder")
    ap.add_argument("--json")
    a = ap.parse_args()
    # Commands run in a temporary folder (run()): every path absolute.
    for k in ("model", "draft", "specula", "ik", "repack_cache"):
        if getattr(a, k):
            setattr(a, k, os.path.abspath(getattr(a, k)))
    with tempfile.TemporaryDirectory() as d:
        # A private copy: a rebuild of build/ during the run must not swap the binary under it.
        shutil.copy2(a.specula, os.path.join(d, "specula"))
        a.specula = os.path.join(d, "specula")
        s, ik = {"passes": {}}, {}
        steps = [(s, None, lambda: specula_plain(a, a.model, 0, 128, "1,5,9")),
                 (ik, None, lambda: ik_plain(a, a.model) if a.ik else {}),
                 (s, "depth", lambda: specula_plain(a, a.model, a.depth, 32, "1")
                  if a.depth else None),
                 (ik, "depth", lambda: ik_depth(a, a.model) if a.ik and a.depth else None),
                 (None, "load", lambda: loads(a, a.model)),
                 (s, "load_cached",
                  lambda: specula_load_cached(a, a.model) if a.repack_cache else None),
                 (s, "spec", lambda: specula_spec(a, a.model) if a.draft else None)]
        for into, key, step in steps:
            try:  # a failed step leaves its rows empty; the others still run
                r = step()
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                print(f"bench_real_shapes.py: {e}", file=sys.stderr)
                continue
            if key == "load":  # both engines' rows and the paired ratio
                s.update(r[0])
                ik.update(r[1])
                s["load_ratio"] = r[2]
            elif r is not None and key is None:
                into.update(r)
            elif r is not None:
                into[key] = r
        table(s, ik, a)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"specula": s, "ik_llama.cpp": ik, "args": vars(a)}, f, indent=1)


if __name__ == "__main__":
    main()
