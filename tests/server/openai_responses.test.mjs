// OpenAI's Responses API (POST /v1/responses) through the official openai SDK's
// client.responses, as Codex speaks it: on a tiny random-weight qwen3 model with Qwen3's real
// vocabulary and chat template (scripts/models/make_models.py vocab). create and stream (the
// SDK's accumulator rebuilds the same response from the events), a forced function call whose
// arguments follow its schema, the call and its output fed back as input items, a json_schema
// text format, and the stateless refusals naming their field; --drop-unsupported-tools.
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startServer, qwen3VocabModel } from "./server_helper.mjs";


const WEATHER = {
  type: "function",
  name: "get_weather",
  description: "The weather in a city now.",
  parameters: {
    type: "object",
    properties: {
      city: { type: "string", enum: ["Paris", "London", "Tokyo"] },
      unit: { type: "string", enum: ["celsius", "fahrenheit"] },
    },
    required: ["city", "unit"],
  },
};

let server, client, spec, specClient;

before(async () => {
  const target = qwen3VocabModel(2);
  server = await startServer(["-m", target, "-t", "1", "-c", "4096", "--drop-unsupported-tools"]);
  client = new OpenAI({ baseURL: server.base + "/v1", apiKey: "none", maxRetries: 0 });
  spec = await startServer(["-m", target, "-md", qwen3VocabModel(1), "-t", "1", "-c", "4096"]);
  specClient = new OpenAI({ baseURL: spec.base + "/v1", apiKey: "none", maxRetries: 0 });
});
after(async () => {
  if (server) await server.stop();
  if (spec) await spec.stop();
});

test("responses.create and responses.stream give the same response", async () => {
  const body = { model: "m", instructions: "You are brief.", input: "Say hello.",
                 max_output_tokens: 12, temperature: 0, reasoning: { effort: "minimal" } };
  const r = await client.responses.create(body);
  assert.equal(r.object, "response");
  assert.match(r.id, /^resp_/);
  assert.ok(["completed", "incomplete"].includes(r.status));
  if (r.status === "incomplete") assert.equal(r.incomplete_details.reason, "max_output_tokens");
  assert.ok(r.usage.input_tokens > 5);
  assert.ok(r.usage.output_tokens > 0 && r.usage.output_tokens <= 12);
  assert.equal(r.instructions, "You are brief.");
  const events = [];
  const stream = client.responses.stream(body);
  stream.on("event", (e) => events.push(e.type));
  const s = await stream.finalResponse();
  assert.equal(s.output_text, r.output_text);
  assert.equal(s.status, r.status);
  assert.equal(events[0], "response.created");
  assert.ok(["response.completed", "response.incomplete"].includes(events.at(-1)));
  const seq = events.length;
  assert.ok(seq >= 4, events.join(","));
});

test("a forced function call, fed back with its output", async () => {
  const ask = [{ role: "user", content: "What is the weather in Paris?" }];
  const r = await client.responses.create({
    model: "m", input: ask, tools: [WEATHER], tool_choice: { type: "function", name: "get_weather" },
    max_output_tokens: 64, temperature: 0,
  });
  const call = r.output.find((o) => o.type === "function_call");
  assert.ok(call, JSON.stringify(r.output));
  assert.equal(call.name, "get_weather");
  const args = JSON.parse(call.arguments);
  assert.deepEqual(Object.keys(args).sort(), ["city", "unit"]);
  // Streamed, the arguments arrive as function_call_arguments deltas.
  const streamed = await client.responses.stream({
    model: "m", input: ask, tools: [WEATHER], tool_choice: { type: "function", name: "get_weather" },
    max_output_tokens: 64, temperature: 0,
  }).finalResponse();
  assert.equal(streamed.output.find((o) => o.type === "function_call").arguments, call.arguments);
  const answer = await client.responses.create({
    model: "m", tools: [WEATHER], max_output_tokens: 8, temperature: 0,
    input: [...ask, { type: "function_call", call_id: call.call_id, name: call.name,
                      arguments: call.arguments },
            { type: "function_call_output", call_id: call.call_id, output: "18 degrees" }],
  });
  assert.ok(answer.usage.input_tokens > r.usage.input_tokens);
});

test("text.format json_schema, dropped tools, and the stateless refusals", async () => {
  const r = await client.responses.create({
    model: "m", input: "A city.", max_output_tokens: 60, temperature: 0,
    text: { format: { type: "json_schema", name: "c", strict: true, schema: {
      type: "object", properties: { city: { enum: ["Paris", "Rome"] } }, required: ["city"] } } },
    tools: [{ type: "web_search" }],
  });
  assert.deepEqual(Object.keys(JSON.parse(r.output_text)), ["city"]);
  assert.deepEqual(r.specula.dropped_tools, ["web_search"]);
  const post = async (body) => {
    const res = await fetch(server.base + "/v1/responses", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  };
  for (const [field, body] of [
    ["previous_response_id", { input: "x", previous_response_id: "resp_1" }],
    ["store", { input: "x", store: true }],
    ["background", { input: "x", background: true }],
    ["input[0].call_id", { input: [{ type: "function_call_output", call_id: "c9", output: "?" }] }],
  ]) {
    const e = await post(body);
    assert.equal(e.status, 400, field);
    assert.equal(e.body.error.param, field, JSON.stringify(e.body));
  }
});

test("chat's reasoning_effort sets the template's thinking switch (Qwen3's enable_thinking)", async () => {
  const render = async (effort) => {
    const r = await fetch(server.base + "/apply-template", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "Hi" }],
                             reasoning_effort: effort }),
    });
    assert.equal(r.status, 200);
    return (await r.json()).prompt;
  };
  const off = await render("none"), on = await render("high");
  assert.notEqual(off, on);
  assert.match(off, /<think>\s*<\/think>/, "enable_thinking false closes an empty think block");
  const c = await client.chat.completions.create({
    model: "m", messages: [{ role: "user", content: "Hi" }], max_tokens: 2,
    reasoning_effort: "low",
  });
  assert.equal(c.object, "chat.completion");
  await assert.rejects(client.chat.completions.create({
    model: "m", messages: [{ role: "user", content: "Hi" }], max_tokens: 2,
    reasoning_effort: "extreme",
  }), (e) => e.status === 400 && e.param === "reasoning_effort");
});

test("speculative == plain: the same output items with and without the draft model", async () => {
  const ask = [{ role: "user", content: "What is the weather in Paris?" }];
  for (const body of [
    { model: "m", input: "Say hello.", max_output_tokens: 24, temperature: 0,
      reasoning: { effort: "minimal" } },
    { model: "m", input: ask, tools: [WEATHER], max_output_tokens: 64, temperature: 0,
      tool_choice: { type: "function", name: "get_weather" } },
  ]) {
    // Item and call ids differ by request; the SDK's stream helper adds `parsed`s.
    const strip = (r) => JSON.parse(JSON.stringify(
      r.output, (k, v) => (["id", "call_id", "parsed", "parsed_arguments"].includes(k) ? undefined : v)));
    const ref = await client.responses.create(body);
    const got = await specClient.responses.create(body);
    assert.deepEqual(strip(got), strip(ref));
    const streamed = await specClient.responses.stream(body).finalResponse();
    assert.deepEqual(strip(streamed), strip(ref));
  }
  assert.match(spec.log(), /drafted [1-9]/, "the draft model drafted");
});
