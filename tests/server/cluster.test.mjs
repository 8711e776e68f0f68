// scripts/cluster.sh end to end, on loopback with the real HAProxy and 3 replicas of stories260K:
//   * prefix affinity: 16 clients, each a multi-turn conversation with its own system prompt;
//     >= 90% of the turns after the first find the whole previous prompt in their replica's cache
//     (usage.prompt_tokens_details.cached_tokens); roundrobin, for comparison, does worse;
//   * a replica whose slots are all busy passes requests of its prefix on to another;
//   * kill -9 of a replica under load: only streams that had started on it fail, and they fail
//     as a broken connection (never a clean end that looks complete); every other request
//     succeeds (elsewhere), and the others keep serving until the supervisor restarts it;
//   * SIGTERM of a replica under load: it drains (/health 503 "draining", its streams finish,
//     exit status 0) and no request fails;
//   * SIGTERM to cluster.sh: the streams in flight finish, then everything exits 0.
import { readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import assert from "node:assert/strict";
import { TARGET } from "./server_helper.mjs";
import { alive, freePorts, heldStream, sleep, startCluster, streamChat } from "./cluster_helper.mjs";

const CLIENTS = 16;
const TURNS = 4;

async function cluster(extra = []) {
  const port = await freePorts(4);
  return startCluster(["-n", "3", "--port", String(port), ...extra, "--",
                       "-m", TARGET(), "-np", "12", "-t", "1", "--max-model-len", "512"]);
}

// A stream that the server cannot hand to the kernel whole: 16 choices of 400 tokens with 20 top
// logprobs and timings each, about 11 MB of events. Linux grows a loopback socket's send buffer up
// to tcp_wmem's max (4 MB by default), so a slowly read stream of a few MB could still be all
// written, its request done, within a second; held (heldStream), this one keeps the server's
// writes waiting, also through HAProxy's two hops (the SIGTERM test checks its size against
// tcp_wmem).
function longChat(systemPrompt) {
  return { model: "m", stream: true, max_tokens: 400, n: 16, ignore_eos: true, temperature: 0,
           logprobs: true, top_logprobs: 20, timings_per_token: true,
           messages: [{ role: "system", content: systemPrompt },
                      { role: "user", content: "A long one, please." }] };
}

function system(i) {
  return `You are storyteller number ${i}. Your stories are about a ${["cat", "dog", "bird", "fox"][i % 4]} ` +
         `called ${["Tom", "Lily", "Max", "Sue", "Ben", "Mia", "Sam", "Zoe"][i % 8]}-${i} who lives by the sea.`;
}

// 16 conversations of TURNS turns at once; per turn after the first, whether the replica held the
// conversation's previous prompt (cached tokens >= that prompt's tokens).
async function conversations(base) {
  const results = await Promise.all(Array.from({ length: CLIENTS }, async (_, i) => {
    const messages = [{ role: "system", content: system(i) }];
    const turns = [];
    for (let t = 0; t < TURNS; ++t) {
      messages.push({ role: "user", content: `Tell me part ${t + 1} of the story, please.` });
      const r = await streamChat(base, messages, 40);
      assert.equal(r.error, null, `conversation ${i} turn ${t}: ${r.error}`);
      turns.push({ replica: r.replica, prompt: r.usage.prompt_tokens,
                   cached: r.usage.prompt_tokens_details.cached_tokens });
      messages.push({ role: "assistant", content: r.text });
    }
    return turns;
  }));
  let hits = 0, returning = 0;
  for (const turns of results) {
    for (let t = 1; t < turns.length; ++t) {
      ++returning;
      if (turns[t].cached >= turns[t - 1].prompt) ++hits;
    }
  }
  return { rate: hits / returning, hits, returning, results };
}

test("prefix affinity: >= 90% of returning turns hit their replica's cache", { timeout: 60000 }, async () => {
  const c = await cluster();
  let affinity;
  try {
    affinity = await conversations(c.base);
  } finally {
    assert.equal((await c.stop()).code, 0);
  }
  const r = await cluster(["--balance", "roundrobin"]);
  let rr;
  try {
    rr = await conversations(r.base);
  } finally {
    assert.equal((await r.stop()).code, 0);
  }
  const spread = {};
  for (const turns of affinity.results) for (const t of turns) spread[t.replica] = (spread[t.replica] ?? 0) + 1;
  console.log(`prefix hit rate, turns after the first: affinity ${affinity.hits}/${affinity.returning} ` +
              `(${(100 * affinity.rate).toFixed(1)}%), roundrobin ${rr.hits}/${rr.returning} ` +
              `(${(100 * rr.rate).toFixed(1)}%); affinity's requests per replica ${JSON.stringify(spread)}`);
  assert.ok(affinity.rate >= 0.9, `affinity hit rate ${affinity.rate}`);
  assert.ok(rr.rate < affinity.rate, `roundrobin ${rr.rate} vs affinity ${affinity.rate}`);
  assert.ok(Object.keys(spread).length >= 2, `the conversations spread over the replicas: ${JSON.stringify(spread)}`);
});

test("a replica whose slots are all busy passes requests on", { timeout: 60000 }, async () => {
  const port = await freePorts(4);
  const c = await startCluster(["-n", "3", "--port", String(port), "--",
                                "-m", TARGET(), "-np", "1", "-t", "1", "--max-model-len", "512"]);
  try {
    // One system prompt: alone, each request goes to the same replica...
    const messages = [{ role: "system", content: system(1) }, { role: "user", content: "Hi" }];
    const alone = new Set();
    for (let i = 0; i < 3; ++i) alone.add((await streamChat(c.base, messages, 4)).replica);
    assert.equal(alone.size, 1);
    // ... and 4 at once, with 1 slot per replica (one more may wait), spread over the replicas.
    const together = await Promise.all([0, 1, 2, 3].map(() => streamChat(c.base, messages, 300, { n: 8 })));
    for (const r of together) assert.equal(r.error, null);
    const used = new Set(together.map((r) => r.replica));
    assert.ok(used.size >= 2, `4 concurrent requests of one prefix on ${[...used]}`);
    assert.ok(used.has([...alone][0]));
  } finally {
    assert.equal((await c.stop()).code, 0);
  }
});

// The first /health of `url` that is not 200, as "BODY STATUS" (it polls every 10 ms).
async function firstNotOk(url) {
  for (;;) {
    const r = await fetch(url + "/health");
    const body = await r.text();
    if (r.status !== 200) return `${body} ${r.status}`;
    await sleep(10);
  }
}

// Waits until `n` requests sent after time `t` have finished (at most 40 s: under a sanitizer on a
// loaded machine a 400-token stream can take seconds), so the checks below see requests that the
// other replicas served after the signal, however slow this machine is.
async function finishedAfter(l, t, n) {
  for (let i = 0; i < 400 && l.records.filter((r) => !r.pending && r.t_sent > t).length < n; ++i)
    await sleep(100);
}

// 16 clients streaming back to back (each its own system prompt) until stop() is called. Each
// request is recorded (cluster_helper.mjs streamChat).
function load(base, maxTokens) {
  const records = [];
  let stopping = false;
  const clients = Array.from({ length: CLIENTS }, async (_, i) => {
    for (let k = 0; !stopping; ++k) {
      const messages = [{ role: "system", content: system(i) },
                        { role: "user", content: `Story ${k}, please.` }];
      const rec = { pending: true, client: i };
      records.push(rec);
      const p = streamChat(base, messages, maxTokens);
      Object.assign(rec, await p);
      rec.pending = false;
    }
  });
  return {
    records,
    async stop() {
      stopping = true;
      await Promise.all(clients);
    },
  };
}

test("kill -9 of a replica under load: only its started streams fail, as broken streams", { timeout: 60000 }, async () => {
  const c = await cluster();
  let l, held;
  try {
    l = load(c.base, 400);
    const victim = "r2";
    // Also a long stream of a client the victim serves, through HAProxy, held after its first
    // bytes (longChat): the victim is still writing it when the kill comes, however fast the build.
    let pinned;
    while (!(pinned = l.records.find((r) => r.replica === victim))) await sleep(10);
    held = heldStream(c.base + "/v1/chat/completions", longChat(system(pinned.client)));
    await held.started;
    process.kill(c.replicas[victim].pid, "SIGKILL");
    const t_kill = performance.now();
    held.resume();
    const cut = await held.result;
    assert.equal(cut.replica, victim);
    assert.ok(cut.error, "the long stream on the killed replica ended cleanly");
    assert.doesNotMatch(cut.text, /data: \[DONE\]/);
    await finishedAfter(l, t_kill, 4);
    await l.stop();
    const recs = l.records;
    const failed = recs.filter((r) => r.error);
    const lost = failed.filter((r) => r.replica === victim);
    const unanswered = failed.filter((r) => r.status === 502 || r.t_head === null);
    const after = recs.filter((r) => r.t_sent > t_kill);
    console.log(`kill -9 ${victim}: ${recs.length} requests, ${failed.length} failed (streams ` +
                `started on ${victim}: ${lost.length}; unanswered by it: ${unanswered.length}), ` +
                `${after.length} sent after it; ` +
                `the lost streams saw: ${[...new Set(lost.map((r) => r.error))].join("; ")}; the held stream ` +
                `broke after ${cut.text.length} bytes: ${cut.error}`);
    // Every failure is a request the killed replica had: one it had not answered yet (HAProxy's
    // 502, or the connection closed before any response) was sent before the kill, and is not
    // replayed elsewhere (it might be what killed its replica); the others are streams that had
    // started on it...
    for (const r of failed) {
      if (r.status === 502 || r.t_head === null) {
        assert.ok(r.t_sent < t_kill + 200, `a request sent ${r.t_sent - t_kill} ms after the kill failed: ${r.error}`);
        continue;
      }
      assert.equal(r.replica, victim, `a request failed elsewhere: ${r.error}`);
      assert.ok(r.t_head !== null, `a request failed before its response head: ${r.error}`);
      // ... and the client sees the connection break, not a clean end that looks complete.
      assert.ok(r.broken, `a lost stream ended without a broken connection: ${r.error}`);
      assert.equal(r.done, false);
    }
    // The others keep serving: what was sent after the kill succeeded, on the other replicas
    // until the supervisor restarted the victim (1 s after its exit at the soonest).
    assert.ok(after.length >= 4, `requests after the kill: ${after.length}`);
    for (const r of after) {
      // HAProxy may have handed a request to the victim on a kept-alive connection in the moment
      // after the kill (a reset, not a refused connection): lost, not replayed, like those above.
      if ((r.status === 502 || r.t_head === null) && r.t_sent < t_kill + 200) continue;
      assert.equal(r.error, null);
      // An answer from the victim's name came from its restarted process, which the supervisor
      // starts 1 s after the exit at the soonest. Timed by the response head, not by t_sent: on a
      // loaded machine the client's event loop may send a request well after it was made.
      if (r.replica === victim) {
        assert.ok(r.t_head - t_kill >= 1000, `the killed ${victim} answered ${r.t_head - t_kill} ms after the kill`);
      }
    }
    await sleep(200);
    assert.match(c.log(), new RegExp(`replica ${victim} \\(pid \\d+\\) exited with status 137`));
  } finally {
    held?.resume();
    if (l) await l.stop();
    const e = await c.stop();
    assert.equal(e.code, 0);
    for (const r of Object.values(c.replicas)) assert.equal(alive(r.pid), false, `${r.name} still runs`);
  }
});

test("SIGTERM of a replica under load: it drains and no request fails", { timeout: 60000 }, async () => {
  const c = await cluster();
  let l, held;
  try {
    l = load(c.base, 400);
    const victim = "r1";
    while (l.records.filter((r) => r.replica === victim && r.done).length < 2) await sleep(20);
    // A long stream straight to the victim, held after its first bytes (longChat): the victim
    // is still writing it, in flight, until it is resumed, however fast the build.
    const url = `http://127.0.0.1:${c.replicas[victim].port}`;
    held = heldStream(url + "/v1/chat/completions", longChat(system(0)));
    await held.started;
    process.kill(c.replicas[victim].pid, "SIGTERM");
    const t_term = performance.now();
    const health = await firstNotOk(url);
    held.resume();
    // It drains: /health says so (503, "draining") while its streams go on.
    const m = health.match(/^(.*) (\d{3})$/s);
    assert.ok(m, `GET /health of the draining replica: ${health}`);
    assert.equal(m[2], "503");
    const body = JSON.parse(m[1]);
    assert.equal(body.status, "draining");
    assert.ok(body.in_flight >= 1, JSON.stringify(body));
    await finishedAfter(l, t_term + 1000, 4);
    await l.stop();
    const recs = l.records;
    const failed = recs.filter((r) => r.error);
    const drained = recs.filter((r) => r.replica === victim && r.t_head < t_term);
    const after = recs.filter((r) => r.t_sent > t_term);
    console.log(`SIGTERM ${victim}: ${recs.length} requests, ${failed.length} failed; ` +
                `${drained.length} streams started on ${victim} before the SIGTERM, all complete; ${after.length} sent after`);
    assert.deepEqual(failed.map((r) => r.error), []);
    const long = await held.result;
    assert.equal(long.error, null);
    assert.match(long.text, /data: \[DONE\]\n\n$/);
    const wmem = Number(readFileSync("/proc/sys/net/ipv4/tcp_wmem", "utf8").trim().split(/\s+/)[2]);
    assert.ok(long.text.length > 2 * wmem, `the held stream (${long.text.length} bytes) must be ` +
              `larger than two socket send buffers can grow (tcp_wmem ${wmem}): the test needs a longer one`);
    assert.ok(drained.length >= 2);
    for (const r of drained) assert.equal(r.done, true);
    assert.ok(after.length >= 4, `requests sent after the SIGTERM: ${after.length}`);
    for (const r of after.filter((r) => r.t_sent > t_term + 1000)) assert.notEqual(r.replica, victim);
    for (let i = 0; i < 50 && !/exited with status/.test(c.log()); ++i) await sleep(100);
    assert.match(c.log(), new RegExp(`replica ${victim} \\(pid \\d+\\) exited with status 0`));
  } finally {
    held?.resume();
    if (l) await l.stop();
    assert.equal((await c.stop()).code, 0);
  }
});

test("SIGTERM to cluster.sh lets the streams in flight finish, then everything exits", { timeout: 60000 }, async () => {
  const port = await freePorts(3);
  const c = await startCluster(["-n", "2", "--port", String(port), "--",
                                "-m", TARGET(), "-np", "2", "-t", "1", "--max-model-len", "512"]);
  const long = streamChat(c.base, [{ role: "user", content: "A long one, please." }], 400, { n: 8 });
  await sleep(300);
  const e = await c.stop();
  const r = await long;
  assert.equal(e.code, 0);
  assert.equal(r.error, null);
  assert.equal(r.done, true);
  for (const x of Object.values(c.replicas)) assert.equal(alive(x.pid), false, `${x.name} still runs`);
  assert.match(c.log(), /cluster: stopped/);
});
