// scripts/cluster.sh's bad input: each is named on stderr and the script exits 1 (stopping what
// it started): a busy port, a replica whose model is missing, an unreachable --remote, a replica
// that never becomes healthy, SERVE_ARGS that set the port. And a --remote replica (a `specula
// serve` started on its own) serves beside a local one.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import { startServer, TARGET } from "./server_helper.mjs";
import { freePorts, runScript, startCluster, streamChat } from "./cluster_helper.mjs";

const serveArgs = () => ["--", "-m", TARGET(), "-np", "1", "-t", "1"];

function listen(server, port) {
  return new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
}

test("a busy front or replica port is named", { timeout: 30000 }, async () => {
  const port = await freePorts(3);
  const busy = net.createServer();
  await listen(busy, port);
  try {
    const r = await runScript(["-n", "1", "--port", String(port), ...serveArgs()]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, new RegExp(`port ${port} is in use`));
  } finally {
    busy.close();
  }
  const busyReplica = net.createServer();
  await listen(busyReplica, port + 2);
  try {
    const r = await runScript(["-n", "2", "--port", String(port), ...serveArgs()]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, new RegExp(`port ${port + 2} \\(replica r2\\) is in use`));
  } finally {
    busyReplica.close();
  }
});

test("a replica that cannot start (a missing model) is named with its error", { timeout: 30000 }, async () => {
  const port = await freePorts(3);
  const r = await runScript(["-n", "2", "--port", String(port), "--", "-m", "/nonexistent/model.gguf"]);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /replica r1 \(port \d+\) exited with status 1 before it became healthy/);
  assert.match(r.stderr, /\/nonexistent\/model\.gguf/);
  assert.match(r.stderr, /error: replica r1 failed to start/);
});

test("an unreachable remote replica is named", { timeout: 30000 }, async () => {
  const port = await freePorts(2);
  const r = await runScript(["--remote", `127.0.0.1:${port + 1}`, "--port", String(port)]);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, new RegExp(`remote replica 127\\.0\\.0\\.1:${port + 1} is unreachable`));
});

test("a replica that never becomes healthy is named", { timeout: 30000 }, async () => {
  const port = await freePorts(2);
  const sick = http.createServer((req, res) => {
    res.writeHead(503, { "Content-Type": "application/json" });
    res.end('{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}');
  });
  await listen(sick, port + 1);
  try {
    const t0 = performance.now();
    const r = await runScript(["--remote", `127.0.0.1:${port + 1}`, "--port", String(port),
                               "--start-timeout", "2"]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, new RegExp(`replica remote1 \\(127\\.0\\.0\\.1:${port + 1}\\) did not become healthy in 2 s \\(GET /health: HTTP 503\\)`));
    assert.ok(performance.now() - t0 < 10000);
  } finally {
    sick.close();
  }
});

test("bad options are refused before anything starts", { timeout: 30000 }, async () => {
  const cases = [
    [["-n", "1", "--port", "8080", "--", "-m", "x.gguf", "--port", "9"], /must not set --port/],
    [["-n", "1", "--", "-m", "x.gguf"], /give --port P/],
    [["--port", "8080"], /give -n N/],
    [["-n", "2", "--port", "8080", "--balance", "random", "--", "-m", "x"], /--balance must be prefix, roundrobin or leastconn/],
    [["-n", "1", "--port", "8080", "--remote", "nohostport", "--", "-m", "x"], /--replica must be HOST:PORT/],
  ];
  for (const [args, message] of cases) {
    const r = await runScript(args);
    assert.equal(r.code, 1, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, message);
  }
});

test("a remote replica serves beside a local one", { timeout: 60000 }, async () => {
  const remote = await startServer(["-m", TARGET(), "-np", "1", "-t", "1"]);
  const port = await freePorts(2);
  const c = await startCluster(["-n", "1", "--port", String(port), "--remote", `127.0.0.1:${remote.port}`,
                                "--balance", "roundrobin", ...serveArgs()]);
  try {
    const seen = new Set();
    for (let i = 0; i < 4; ++i) {
      const r = await streamChat(c.base, [{ role: "user", content: `Hello ${i}` }], 4);
      assert.equal(r.error, null);
      seen.add(r.replica);
    }
    assert.deepEqual([...seen].sort(), ["r1", "remote1"]);
  } finally {
    assert.equal((await c.stop()).code, 0);
    await remote.stop();
  }
});
