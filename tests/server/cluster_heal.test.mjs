// scripts/cluster.sh survives a poison request and heals (issue #45), with the real HAProxy and
// replicas of stories260K on loopback:
//   * a poison request (one its replica dies of before answering: here the test kills the replica
//     that holds it) through 3 replicas kills exactly one: HAProxy does not replay it onto the
//     others (no retry after an empty response); the client gets a 502; HAProxy's Prometheus
//     exporter (--metrics-port) counts no retry and no session on the others; the supervisor
//     says so and restarts the killed replica, which serves again;
//   * one memory budget for the host: 3 replicas x --cache-ram over --host-memory is refused
//     before anything starts, naming the numbers; a share too small for one replica's plan is
//     refused by the replica, its plan named;
//   * replicas on other hosts by address (--replica HOST:PORT): replicas bound to 127.0.0.2 and
//     127.0.0.3, stand-ins for two hosts, serve through the cluster.
import { spawn } from "node:child_process";
import { test } from "node:test";
import assert from "node:assert/strict";
import { BIN, TARGET } from "./server_helper.mjs";
import { alive, freePorts, runScript, sleep, startCluster } from "./cluster_helper.mjs";

const serveArgs = (np = "2") => ["--", "-m", TARGET(), "-np", np, "-t", "1", "--max-model-len", "512"];

async function metric(url, name) {
  try {
    const text = await (await fetch(url + "/metrics")).text();
    const m = text.match(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m"));
    return m ? Number(m[1]) : NaN;
  } catch {
    return NaN;
  }
}

// HAProxy's exporter: `name`{server="..."} for each replica of the backend.
async function perServer(metricsUrl, name) {
  const text = await (await fetch(metricsUrl + "/metrics")).text();
  const out = {};
  for (const m of text.matchAll(new RegExp(`^${name}\\{proxy="replicas",server="([^"]+)"\\} (\\S+)$`, "gm")))
    out[m[1]] = Number(m[2]);
  return out;
}

// The poison request: a replica that receives it dies before answering (as one whose template
// or parser crashes the process). Made deterministic here: the replicas are frozen (SIGSTOP),
// the request goes in, HAProxy's exporter says which replica holds it, and that one is killed
// (SIGKILL) before it could answer; the others are thawed (SIGCONT). A retry would now reach a
// live replica and succeed: the request must fail (502) instead, and no other replica see it.
test("a poison request kills one replica, is not replayed, and the replica is restarted", { timeout: 30000 }, async () => {
  const port = await freePorts(5);
  const c = await startCluster(["-n", "3", "--port", String(port), "--metrics-port", String(port + 4),
                                "--host-memory", "3072", ...serveArgs()]);
  const metrics = `http://127.0.0.1:${port + 4}`;
  const frozen = Object.values(c.replicas);
  try {
    assert.match(c.log(), /memory budget 3072 MiB \(--host-memory\) over 3 local replicas: each plans .* within 1024 MiB/);
    const before = await perServer(metrics, "haproxy_server_sessions_total");
    for (const r of frozen) process.kill(r.pid, "SIGSTOP");
    const t0 = performance.now();
    const answer = fetch(c.base + "/v1/completions", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ prompt: "The poison request", max_tokens: 4 }) })
      .then(async (r) => ({ status: r.status, body: await r.text() }),
            (e) => ({ status: 0, body: `${e.name}: ${e.message}` }));
    let victim = null;
    for (let i = 0; i < 300 && !victim; ++i) {
      const cur = await perServer(metrics, "haproxy_server_current_sessions");
      victim = Object.keys(cur).find((n) => cur[n] >= 1) ?? null;
      if (!victim) await sleep(10);
    }
    assert.ok(victim, "the request reached no replica");
    process.kill(c.replicas[victim].pid, "SIGKILL");
    for (const r of frozen) if (r.name !== victim) process.kill(r.pid, "SIGCONT");
    const a = await answer;
    await sleep(300);
    const after = await perServer(metrics, "haproxy_server_sessions_total");
    console.log(`poison request on ${victim}: HTTP ${a.status} after ${(performance.now() - t0).toFixed(0)} ms; ` +
                `sessions per replica before ${JSON.stringify(before)}, after ${JSON.stringify(after)}`);
    assert.equal(a.status, 502, a.body);
    for (const n of Object.keys(before))
      if (n !== victim) assert.equal(after[n], before[n], `the poison request was replayed onto ${n}`);
    assert.equal(after[victim], before[victim] + 1);
    assert.equal(await metric(metrics, "haproxy_backend_retry_warnings_total"), 0);
    const old = c.replicas[victim];
    // The supervisor says so, and restarts it after 1 s.
    for (let i = 0; i < 100 && !new RegExp(`replica ${victim} restarted: pid (\\d+)`).test(c.log()); ++i) await sleep(50);
    assert.match(c.log(), new RegExp(`replica ${victim} \\(pid ${old.pid}\\) exited with status 137 after \\d+ s; ` +
                                     `HAProxy routes around it; restarting it in 1 s \\(restart 1\\)`));
    const pid = Number(c.log().match(new RegExp(`replica ${victim} restarted: pid (\\d+)`))[1]);
    assert.notEqual(pid, old.pid);
    assert.ok(alive(pid));
    // It serves again: healthy on its port, and UP in HAProxy.
    let healthy = false;
    for (let i = 0; i < 100 && !healthy; ++i) {
      try { healthy = (await fetch(`http://127.0.0.1:${old.port}/health`)).status === 200; } catch {}
      if (!healthy) await sleep(100);
    }
    assert.ok(healthy, `the restarted ${victim} never answered /health 200`);
    let up = false;
    for (let i = 0; i < 100 && !up; ++i) {
      const text = await (await fetch(metrics + "/metrics")).text();
      up = new RegExp(`haproxy_server_status\\{proxy="replicas",server="${victim}",state="UP"\\} 1`).test(text);
      if (!up) await sleep(100);
    }
    assert.ok(up, `${victim} is not UP again in HAProxy`);
    const ok = await fetch(c.base + "/v1/completions", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 4 }) });
    assert.equal(ok.status, 200);
  } finally {
    for (const r of frozen) try { process.kill(r.pid, "SIGCONT"); } catch {}
    const e = await c.stop();
    assert.equal(e.code, 0);
  }
});

test("one memory budget: replicas x --cache-ram over the host is refused before starting", { timeout: 20000 }, async () => {
  const port = await freePorts(4);
  const t0 = performance.now();
  const r = await runScript(["-n", "3", "--port", String(port), "--host-memory", "24576",
                             "--", "-m", TARGET(), "--cache-ram", "10000"]);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /3 local replicas x --cache-ram 10000 MiB = 30000 MiB of prompt cache, more than this host's memory budget of 24576 MiB \(--host-memory\)/);
  assert.match(r.stderr, /give --cache-ram at most 8192 MiB/);
  assert.ok(performance.now() - t0 < 5000, "refused only after starting something");
  // A share too small for one replica's plan: the replica refuses it, naming its plan.
  const small = await runScript(["-n", "2", "--port", String(port), "--host-memory", "2", ...serveArgs("1")]);
  assert.equal(small.code, 1, small.stderr);
  assert.match(small.stderr, /replica r1 \(port \d+\) exited with status 1 before it became healthy/);
  assert.match(small.stderr, /planning within --memory-budget 1 MiB/);
  assert.match(small.stderr, /not enough memory/);
});

// `specula serve` bound to `host` (a stand-in for another machine) on a free port.
async function replicaAt(host) {
  const port = await freePorts(1);
  const proc = spawn(BIN, ["serve", "--host", host, "--port", String(port), "-m", TARGET(), "-np", "1", "-t", "1"],
                     { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  proc.stderr.on("data", (d) => { log += d; });
  for (let i = 0; ; ++i) {
    try {
      if ((await fetch(`http://${host}:${port}/health`)).ok) break;
    } catch {}
    if (i > 200 || proc.exitCode !== null) throw new Error(`replica on ${host} did not start:\n${log}`);
    await sleep(50);
  }
  return { addr: `${host}:${port}`, proc };
}

test("replicas on other hosts, given by address, serve through the cluster", { timeout: 30000 }, async () => {
  const a = await replicaAt("127.0.0.2");
  const b = await replicaAt("127.0.0.3");
  const port = await freePorts(1);
  const c = await startCluster(["--replica", a.addr, "--replica", b.addr, "--port", String(port),
                                "--balance", "roundrobin"]);
  try {
    assert.match(c.log(), new RegExp(`replica remote1 http://${a.addr} healthy`));
    assert.match(c.log(), new RegExp(`replica remote2 http://${b.addr} healthy`));
    const seen = new Set();
    for (let i = 0; i < 4; ++i) {
      const r = await fetch(c.base + "/v1/completions", {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ prompt: `Once ${i}`, max_tokens: 2 }) });
      assert.equal(r.status, 200);
      seen.add(r.headers.get("x-specula-replica"));
    }
    assert.deepEqual([...seen].sort(), ["remote1", "remote2"]);
  } finally {
    assert.equal((await c.stop()).code, 0);
    a.proc.kill("SIGTERM");
    b.proc.kill("SIGTERM");
  }
});
