// /metrics parsed by a real Prometheus text-format parser (parse-prometheus-text-format, which
// follows prom2json's output): vLLM's exact metric names with a model_name label, their types,
// and values that match what the responses' usage reported; KV-cache usage and acceptance gauges.
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { startServer, TARGET, DRAFT } from "./server_helper.mjs";

let server;
before(async () => {
  server = await startServer(["-m", TARGET(), "-md", DRAFT(), "--draft", "4", "-np", "2",
                              "--max-model-len", "512", "--served-model-name", "tiny"]);
});
after(async () => { if (server) await server.stop(); });

async function scrape() {
  const r = await fetch(server.base + "/metrics");
  assert.equal(r.status, 200);
  const families = parsePrometheusTextFormat(await r.text());
  return Object.fromEntries(families.map((f) => [f.name, f]));
}

function value(families, name, labels = {}) {
  const f = families[name];
  assert.ok(f, `metric ${name} is exposed`);
  const m = f.metrics.find((s) =>
    Object.entries({ model_name: "tiny", ...labels }).every(([k, v]) => s.labels?.[k] === v));
  assert.ok(m, `${name} has a sample with labels ${JSON.stringify(labels)}`);
  return Number(m.value);
}

test("vLLM's metric names, types and model_name label; counts equal the usage", async () => {
  const before = await scrape();
  const usages = [];
  for (const prompt of ["Once upon a time", "The little dog", "Lily saw a"]) {
    const r = await fetch(server.base + "/v1/completions", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ prompt, max_tokens: 24, temperature: 0 }),
    });
    usages.push((await r.json()).usage);
  }
  const m = await scrape();
  const types = {
    "vllm:spec_decode_num_drafts_total": "COUNTER",
    "vllm:spec_decode_num_draft_tokens_total": "COUNTER",
    "vllm:spec_decode_num_accepted_tokens_total": "COUNTER",
    "vllm:spec_decode_num_accepted_tokens_per_pos_total": "COUNTER",
    "vllm:prompt_tokens_total": "COUNTER",
    "vllm:generation_tokens_total": "COUNTER",
    "vllm:request_success_total": "COUNTER",
    "vllm:num_requests_running": "GAUGE",
    "vllm:num_requests_waiting": "GAUGE",
    "vllm:kv_cache_usage_perc": "GAUGE",
    "vllm:spec_decode_draft_acceptance_rate": "GAUGE",
    "vllm:time_to_first_token_seconds": "HISTOGRAM",
    "vllm:e2e_request_latency_seconds": "HISTOGRAM",
    "vllm:time_per_output_token_seconds": "HISTOGRAM",
    "vllm:request_prompt_tokens": "HISTOGRAM",
    "vllm:request_generation_tokens": "HISTOGRAM",
  };
  for (const [name, type] of Object.entries(types)) {
    assert.ok(m[name], `${name} is exposed`);
    assert.equal(m[name].type, type, name);
    // (The parser folds a histogram's series into one bucket map and drops its labels.)
    if (type !== "HISTOGRAM")
      for (const s of m[name].metrics) assert.equal(s.labels?.model_name, "tiny", name);
  }
  const sum = (k) => usages.reduce((a, u) => a + u.speculative[k], 0);
  const delta = (name, labels) => value(m, name, labels) - (before[name] ? value(before, name, labels) : 0);
  assert.equal(delta("vllm:spec_decode_num_drafts_total"), sum("drafts"));
  assert.equal(delta("vllm:spec_decode_num_draft_tokens_total"), sum("drafted"));
  assert.equal(delta("vllm:spec_decode_num_accepted_tokens_total"), sum("accepted"));
  assert.equal(delta("vllm:generation_tokens_total"), usages.reduce((a, u) => a + u.completion_tokens, 0));
  assert.equal(delta("vllm:prompt_tokens_total"), usages.reduce((a, u) => a + u.prompt_tokens, 0));
  assert.equal(delta("vllm:request_success_total", { finished_reason: "length" }), 3);
  let per_pos = 0;
  for (const s of m["vllm:spec_decode_num_accepted_tokens_per_pos_total"].metrics) {
    assert.match(s.labels.position, /^\d+$/);
    per_pos += Number(s.value);
  }
  assert.equal(per_pos, value(m, "vllm:spec_decode_num_accepted_tokens_total"));
  const rate = value(m, "vllm:spec_decode_draft_acceptance_rate");
  assert.ok(Math.abs(rate - value(m, "vllm:spec_decode_num_accepted_tokens_total") /
                            value(m, "vllm:spec_decode_num_draft_tokens_total")) < 1e-9);
  assert.equal(value(m, "vllm:num_requests_running"), 0);
  assert.equal(value(m, "vllm:kv_cache_usage_perc"), 0);  // idle: nothing held
  const ttft = m["vllm:time_to_first_token_seconds"].metrics[0];
  assert.equal(Number(ttft.buckets["+Inf"]), 3 + (before["vllm:time_to_first_token_seconds"]
    ? Number(before["vllm:time_to_first_token_seconds"].metrics[0].buckets["+Inf"]) : 0));
  assert.equal(ttft.buckets["0.1"] !== undefined, true, "bucket bounds print as written");
  // The older specula: names stay.
  assert.ok(m["specula:spec_decode_num_drafts"]);
});
