// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) through the official
// Anthropic SDK, as Claude Code speaks it: on a tiny random-weight qwen3 model with Qwen3's real
// vocabulary and chat template (scripts/models/make_models.py vocab), served with its one-block
// draft. create and stream (the SDK's own event parser assembles the message), a forced tool call
// whose input follows the tool's input_schema, the tool_result fed back, count_tokens equal to
// the usage, the x-api-key header, and errors in Anthropic's shape naming the field.
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import { startServer, qwen3VocabModel } from "./server_helper.mjs";

const KEY = "sk-ant-test";

const WEATHER = {
  name: "get_weather",
  description: "The weather in a city now.",
  input_schema: {
    type: "object",
    properties: {
      city: { type: "string", enum: ["Paris", "London", "Tokyo"] },
      unit: { type: "string", enum: ["celsius", "fahrenheit"] },
    },
    required: ["city", "unit"],
  },
};

let server, client, plain, plainClient;

before(async () => {
  const target = qwen3VocabModel(2), draft = qwen3VocabModel(1);
  server = await startServer(["-m", target, "-md", draft, "-t", "1", "-c", "4096", "--api-key",
                              KEY]);
  client = new Anthropic({ baseURL: server.base, apiKey: KEY, maxRetries: 0 });
  plain = await startServer(["-m", target, "-t", "1", "-c", "4096", "--api-key", KEY]);
  plainClient = new Anthropic({ baseURL: plain.base, apiKey: KEY, maxRetries: 0 });
});
after(async () => {
  if (server) await server.stop();
  if (plain) await plain.stop();
});

const ASK = [{ role: "user", content: "What is the weather in Paris?" }];

test("messages.create: content blocks, stop_reason and usage", async () => {
  const m = await client.messages.create({
    model: "claude-sonnet-4-5", max_tokens: 12, system: "You are brief.", messages: ASK,
    temperature: 0,
  });
  assert.equal(m.type, "message");
  assert.equal(m.role, "assistant");
  assert.match(m.id, /^msg_/);
  assert.ok(["end_turn", "max_tokens"].includes(m.stop_reason), m.stop_reason);
  assert.ok(m.usage.input_tokens > 10);
  assert.ok(m.usage.output_tokens > 0 && m.usage.output_tokens <= 12);
  for (const b of m.content) assert.ok(["text", "thinking"].includes(b.type), b.type);
});

test("messages.stream: the SDK assembles the same message as create", async () => {
  const body = { model: "m", max_tokens: 16, messages: ASK, temperature: 0,
                 thinking: { type: "disabled" } };
  const whole = await client.messages.create(body);
  const events = [];
  const stream = client.messages.stream(body);
  stream.on("streamEvent", (e) => events.push(e.type));
  const m = await stream.finalMessage();
  assert.deepEqual(m.content, whole.content);
  assert.equal(m.stop_reason, whole.stop_reason);
  assert.equal(m.usage.output_tokens, whole.usage.output_tokens);
  assert.equal(events[0], "message_start");
  assert.equal(events.at(-1), "message_stop");
  assert.ok(events.includes("message_delta"));
});

test("a forced tool call, its tool_result fed back, and count_tokens", async () => {
  const call = await client.messages.create({
    model: "m", max_tokens: 64, messages: ASK, tools: [WEATHER],
    tool_choice: { type: "tool", name: "get_weather" }, temperature: 0,
  });
  assert.equal(call.stop_reason, "tool_use");
  const use = call.content.find((b) => b.type === "tool_use");
  assert.ok(use, JSON.stringify(call.content));
  assert.equal(use.name, "get_weather");
  assert.ok(["Paris", "London", "Tokyo"].includes(use.input.city), JSON.stringify(use.input));
  assert.deepEqual(Object.keys(use.input).sort(), ["city", "unit"]);
  // Streamed, the input arrives as input_json_delta pieces the SDK parses back.
  const streamed = await client.messages.stream({
    model: "m", max_tokens: 64, messages: ASK, tools: [WEATHER],
    tool_choice: { type: "tool", name: "get_weather" }, temperature: 0,
  }).finalMessage();
  assert.deepEqual(streamed.content.find((b) => b.type === "tool_use").input, use.input);

  const turn = [...ASK, { role: "assistant", content: call.content },
                { role: "user", content: [{ type: "tool_result", tool_use_id: use.id,
                                            content: "18 degrees, sunny" }] }];
  const answer = await client.messages.create({
    model: "m", max_tokens: 8, messages: turn, tools: [WEATHER], temperature: 0,
  });
  // Prompt tokens found in the slot's cache are cache_read_input_tokens, as Anthropic counts.
  const total = (u) => u.input_tokens + u.cache_read_input_tokens;
  assert.ok(total(answer.usage) > total(call.usage));
  assert.ok(answer.usage.cache_read_input_tokens > 0, "the turn before is cached");
  const counted = await client.messages.countTokens({ model: "m", messages: turn,
                                                      tools: [WEATHER] });
  assert.equal(counted.input_tokens,
               answer.usage.input_tokens + (answer.usage.cache_read_input_tokens ?? 0));
});

test("errors in Anthropic's shape, naming the field; x-api-key is required", async () => {
  const post = (body, headers = { "x-api-key": KEY }) =>
    fetch(server.base + "/v1/messages", {
      method: "POST", headers: { "Content-Type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
  let r = await post({ model: "m", messages: ASK });
  assert.equal(r.status, 400);
  let e = await r.json();
  assert.equal(e.type, "error");
  assert.equal(e.error.type, "invalid_request_error");
  assert.match(e.error.message, /max_tokens/);
  r = await post({ model: "m", max_tokens: 4, messages: ASK, service_tier: "auto" });
  assert.match((await r.json()).error.message, /service_tier/);
  r = await post({ model: "m", max_tokens: 4, messages: ASK,
                   tools: [{ type: "web_search_20250305", name: "web_search" }] });
  assert.match((await r.json()).error.message, /web_search_20250305/);
  r = await post({ model: "m", max_tokens: 4, messages: [
    { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_x", content: "?" }] }] });
  assert.equal(r.status, 400);
  assert.match((await r.json()).error.message, /unknown tool_use_id 'toolu_x'/);
  r = await post({ model: "m", max_tokens: 4, messages: ASK }, {});
  assert.equal(r.status, 401);
});

test("speculative == plain: the same text and tool input with and without the draft model", async () => {
  for (const body of [
    { model: "m", max_tokens: 24, messages: ASK, temperature: 0, thinking: { type: "disabled" } },
    { model: "m", max_tokens: 64, messages: ASK, tools: [WEATHER], temperature: 0,
      tool_choice: { type: "tool", name: "get_weather" } },
  ]) {
    const blocks = (m) => m.content.map(({ id, ...rest }) => rest);  // tool_use ids differ
    const spec = await client.messages.create(body);
    const ref = await plainClient.messages.create(body);
    assert.deepEqual(blocks(spec), blocks(ref));
    assert.equal(spec.stop_reason, ref.stop_reason);
    const streamed = await client.messages.stream(body).finalMessage();
    assert.deepEqual(blocks(streamed), blocks(ref));
  }
  assert.match(server.log(), /drafted [1-9]/, "the draft model drafted");
});
