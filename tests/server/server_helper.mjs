// Shared by the Node tests: starts `specula serve` on a free loopback port (--port 0, the port is
// read from its "listening on" log line), waits for GET /health, and always kills it afterwards.
// Paths come from CTest's environment (tests/server/CMakeLists.txt); SPECULA_SHARED_DIR, when set,
// overrides the default shared/ folder as it does for the C++ tests.
import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

export const BIN = process.env.SPECULA_BIN;
export const SHARED = process.env.SPECULA_SHARED_DIR || process.env.SPECULA_SHARED_DIR_DEFAULT;
export const ARTIFACTS = process.env.SPECULA_ARTIFACT_DIR || ".";

export function sharedPath(rel) {
  if (!SHARED) throw new Error("SPECULA_SHARED_DIR(_DEFAULT) is not set (run through CTest)");
  const p = path.join(SHARED, rel);
  if (!existsSync(p)) throw new Error(`missing test data file: ${p}`);
  return p;
}

export const TARGET = () => sharedPath("models/tinystories/stories260K.gguf");

// A tiny random-weight qwen3 model with Qwen3's real vocabulary, special tokens and chat
// template (scripts/models/make_models.py vocab from ../shared's ggml-vocab-qwen3.gguf), with
// `layers` blocks, in a fresh temporary folder; a file with fewer layers is a usable draft.
export function qwen3VocabModel(layers) {
  const make = path.join(path.dirname(new URL(import.meta.url).pathname), "..", "..", "scripts",
                         "models", "make_models.py");
  const dir = mkdtempSync(path.join(tmpdir(), "specula-qwen3-"));
  const out = path.join(dir, `qwen3-vocab-l${layers}.gguf`);
  execFileSync("/usr/bin/python3", [make, "vocab", sharedPath("vocab/ggml-vocab-qwen3.gguf"), out,
                                    "--layers", String(layers)], { stdio: "ignore" });
  return out;
}
export const DRAFT = () => sharedPath("models/tinystories/llama2xs.gguf");

// `specula run --temp 0` output: the reference for greedy server output.
export function runGreedy(prompt, n) {
  return execFileSync(BIN, ["run", "-m", TARGET(), "-p", prompt, "-n", String(n), "--temp", "0"],
                      { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"], timeout: 60000 });
}

const running = new Set();
process.on("exit", () => { for (const p of running) p.kill("SIGKILL"); });

export async function startServer(args, timeoutMs = 60000) {
  if (!BIN || !existsSync(BIN)) throw new Error(`specula binary not found: ${BIN}`);
  const proc = spawn(BIN, ["serve", "--host", "127.0.0.1", "--port", "0", ...args],
                     { stdio: ["ignore", "ignore", "pipe"] });
  running.add(proc);
  let log = "";
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("server did not start:\n" + log)), timeoutMs);
    proc.stderr.on("data", (d) => {
      log += d.toString();
      const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    proc.on("exit", (code) => { clearTimeout(timer); reject(new Error(`server exited (${code}):\n${log}`)); });
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; ++i) {
    try {
      const r = await fetch(base + "/health");
      if (r.ok) break;
    } catch {}
    if (i > 200) throw new Error("server not healthy:\n" + log);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    base,
    port,
    log: () => log,
    stop: async () => {
      if (proc.exitCode !== null) return;
      const exited = new Promise((r) => proc.on("exit", r));
      proc.kill("SIGTERM");
      const t = setTimeout(() => proc.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(t);
      running.delete(proc);
      if (/Sanitizer|runtime error:/.test(log)) throw new Error("specula serve reported:\n" + log);
    },
  };
}
