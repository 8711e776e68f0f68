// Shared by the cluster tests: runs scripts/cluster.sh (the real HAProxy in front of `specula
// serve` replicas) on loopback ports, and streams chat completions through it, recording what
// the client saw of each. Paths come from CTest's environment (tests/server/CMakeLists.txt).
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), "../../scripts/cluster.sh");

const running = new Set();
process.on("exit", () => {
  for (const p of running) {
    try { process.kill(-p.pid, "SIGKILL"); } catch {}
  }
});

function portFree(port) {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });
}

// `n` consecutive free loopback ports, below Linux's ephemeral range (32768-60999): a port in it
// that is free when probed can still be taken before HAProxy binds it, by the local end of any
// connection a test running beside this one opens (a full run failed so: "cannot bind socket").
export async function freePorts(n) {
  for (let attempt = 0; attempt < 50; ++attempt) {
    const base = 20000 + Math.floor(Math.random() * (12000 - n));
    let ok = true;
    for (let p = base; p < base + n && ok; ++p) ok = await portFree(p);
    if (ok) return base;
  }
  throw new Error(`no ${n} consecutive free ports found`);
}

// Runs cluster.sh with `args` until it exits; resolves { code, signal, stderr }.
export function runScript(args, timeoutMs = 30000) {
  return new Promise((resolve, reject) => {
    const p = spawn("bash", [SCRIPT, ...args], { stdio: ["ignore", "pipe", "pipe"], detached: true });
    running.add(p);
    let out = "";
    p.stdout.on("data", (d) => { out += d; });
    p.stderr.on("data", (d) => { out += d; });
    const t = setTimeout(() => {
      try { process.kill(-p.pid, "SIGKILL"); } catch {}
      reject(new Error(`cluster.sh ${args.join(" ")} ran past ${timeoutMs} ms:\n${out}`));
    }, timeoutMs);
    p.on("exit", (code, signal) => {
      clearTimeout(t);
      running.delete(p);
      resolve({ code, signal, stderr: out });
    });
  });
}

// Starts cluster.sh in the background and waits for "cluster: ready". The replicas' pids and
// ports come from its "replica rN pid P http://..." lines.
export async function startCluster(args, timeoutMs = 30000) {
  const logDir = mkdtempSync(path.join(os.tmpdir(), "specula-cluster-test-"));
  const p = spawn("bash", [SCRIPT, "--log-dir", logDir, ...args],
                  { stdio: ["ignore", "ignore", "pipe"], detached: true });
  running.add(p);
  let log = "";
  const exited = new Promise((resolve) => p.on("exit", (code, signal) => {
    running.delete(p);
    resolve({ code, signal });
  }));
  await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error("cluster did not start:\n" + log)), timeoutMs);
    p.stderr.on("data", (d) => {
      log += d;
      if (log.includes("cluster: ready")) { clearTimeout(t); resolve(); }
    });
    exited.then(({ code }) => { clearTimeout(t); reject(new Error(`cluster.sh exited (${code}):\n${log}`)); });
  });
  const replicas = {};
  for (const m of log.matchAll(/replica (r\d+) pid (\d+) http:\/\/127\.0\.0\.1:(\d+)/g))
    replicas[m[1]] = { name: m[1], pid: Number(m[2]), port: Number(m[3]) };
  const port = Number(log.match(/haproxy pid \d+ http:\/\/127\.0\.0\.1:(\d+)/)[1]);
  return {
    base: `http://127.0.0.1:${port}`,
    replicas,
    logDir,
    log: () => log,
    // SIGTERM to the script: everything drains and stops; resolves its exit.
    stop: async (limitMs = 20000) => {
      process.kill(p.pid, "SIGTERM");
      const t = setTimeout(() => { try { process.kill(-p.pid, "SIGKILL"); } catch {} }, limitMs);
      const e = await exited;
      clearTimeout(t);
      return e;
    },
  };
}

export function alive(pid) {
  try { process.kill(pid, 0); return true; } catch { return false; }
}

// One streamed chat completion through `base`; never throws. The record says when the response
// head arrived (a stream that started), from which replica, the text, the usage, whether
// [DONE] came, and what went wrong: `error` (an HTTP status, an error event, or a stream that
// ended without [DONE]) and `broken` (the connection broke mid-body: the client's read failed).
export async function streamChat(base, messages, maxTokens, extra = {}, rec = {}) {
  Object.assign(rec, { t_sent: performance.now(), t_head: null, t_end: null, replica: null,
                       status: 0, text: "", done: false, usage: null, error: null, broken: false });
  try {
    const r = await fetch(base + "/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ model: "m", stream: true, stream_options: { include_usage: true },
                             messages, max_tokens: maxTokens, temperature: 0, ...extra }),
    });
    rec.t_head = performance.now();
    rec.status = r.status;
    rec.replica = r.headers.get("x-specula-replica");
    if (r.status !== 200) {
      rec.error = `HTTP ${r.status}: ${await r.text()}`;
      return rec;
    }
    const dec = new TextDecoder();
    let buf = "";
    for await (const chunk of r.body) {
      buf += dec.decode(chunk, { stream: true });
      for (let i; (i = buf.indexOf("\n\n")) >= 0; buf = buf.slice(i + 2)) {
        for (const line of buf.slice(0, i).split("\n")) {
          if (!line.startsWith("data: ")) continue;
          const data = line.slice(6);
          if (data === "[DONE]") { rec.done = true; continue; }
          const j = JSON.parse(data);
          if (j.error) rec.error = "error event: " + JSON.stringify(j.error);
          if (j.usage) rec.usage = j.usage;
          const delta = j.choices?.[0]?.delta?.content;
          if (delta) rec.text += delta;
        }
      }
    }
    if (!rec.done && !rec.error) rec.error = "the stream ended without [DONE]";
  } catch (e) {
    rec.broken = rec.t_head !== null;
    rec.error = `${e.name}: ${e.message}` + (e.cause ? ` (${e.cause.code ?? e.cause.message})` : "");
  } finally {
    rec.t_end = performance.now();
  }
  return rec;
}

// A streamed POST of `body` (JSON) to `url` whose reading stops after the first bytes until
// resume() is called. Once the kernel's socket buffers are full, the server's writes wait: the
// request stays in flight for as long as the caller needs. Never throws; `result` resolves
// { status, replica (x-specula-replica), text (the body as read), error (null, or what broke:
// an error, or a connection that closed before the body's end) }.
export function heldStream(url, body) {
  let resume, started;
  const go = new Promise((r) => (resume = r));
  const first = new Promise((r) => (started = r));
  const result = new Promise((resolve) => {
    const req = http.request(url, { method: "POST", headers: { "Content-Type": "application/json" } },
                             (res) => {
      let text = "";
      const end = (error) => resolve({ status: res.statusCode,
                                       replica: res.headers["x-specula-replica"] ?? null, text, error });
      res.setEncoding("utf8");
      res.on("data", (d) => {
        if (text === "") {
          res.pause();
          started();
          go.then(() => res.resume());
        }
        text += d;
      });
      res.on("end", () => end(null));
      res.on("error", (e) => end(e.message));
      res.on("close", () => end(res.complete ? null : "the connection closed before the body's end"));
    });
    req.on("error", (e) => {
      started();
      resolve({ status: 0, replica: null, text: "", error: e.message });
    });
    req.end(JSON.stringify(body));
  });
  return { started: first, resume, result };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
