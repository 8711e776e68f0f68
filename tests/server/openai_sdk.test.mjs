// The official OpenAI Node SDK against `specula serve` (stories260K target, llama2xs draft):
// models, completions and chat, streaming and not, greedy output equal to `specula run --temp 0`,
// the speculative usage block, and the SDK's typed errors for a wrong key and an unknown model;
// every request field the server implements (logprobs, echo, response_format, penalties,
// logit_bias, n, seed, stream_options) and a 400 naming each field it refuses.
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startServer, runGreedy, TARGET, DRAFT } from "./server_helper.mjs";

let server, client;
const KEY = "test-key-123";

before(async () => {
  server = await startServer(["-m", TARGET(), "-md", DRAFT(), "--draft", "4", "--parallel", "2",
                              "--max-model-len", "512", "--api-key", KEY,
                              "--served-model-name", "tiny"]);
  client = new OpenAI({ baseURL: server.base + "/v1", apiKey: KEY, timeout: 60000, maxRetries: 0 });
});
after(async () => { if (server) await server.stop(); });

test("models.list names the served model", async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids, ["tiny"]);
});

test("completions: greedy text equals specula run, with speculative usage", async () => {
  const prompt = "Lily saw a big red";
  const r = await client.completions.create({ model: "tiny", prompt, max_tokens: 40, temperature: 0 });
  assert.equal(r.choices[0].text, runGreedy(prompt, 40));
  assert.equal(r.usage.completion_tokens, 40);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 40);
  assert.ok(r.usage.speculative.drafted > 0);
  assert.ok(r.usage.speculative.accepted <= r.usage.speculative.drafted);
});

test("completions: streaming equals non-streaming", async () => {
  const req = { model: "tiny", prompt: "The little dog", max_tokens: 50, temperature: 0 };
  const full = await client.completions.create(req);
  let text = "", chunks = 0;
  for await (const c of await client.completions.create({ ...req, stream: true })) {
    text += c.choices[0]?.text ?? "";
    chunks++;
  }
  assert.ok(chunks > 1);
  assert.equal(text, full.choices[0].text);
});

test("chat: streaming equals non-streaming and tokens are marked", async () => {
  const req = { model: "tiny", messages: [{ role: "user", content: "Tell me about a cat." }],
                max_tokens: 50, temperature: 0 };
  const full = await client.chat.completions.create(req);
  assert.equal(full.choices[0].message.role, "assistant");
  const content = full.choices[0].message.content;
  assert.ok(content.length > 0);
  let text = "", drafted = 0, finish = null;
  for await (const c of await client.chat.completions.create({ ...req, stream: true })) {
    const ch = c.choices[0];
    if (!ch) continue;
    text += ch.delta?.content ?? "";
    for (const t of ch.specula?.tokens ?? []) if (t.drafted) drafted++;
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  assert.equal(text, content);
  assert.ok(drafted > 0, "some tokens were accepted drafts");
  assert.equal(finish, full.choices[0].finish_reason);
});

test("errors: wrong key is 401, bad field is 400; any model name is served", async () => {
  const bad = new OpenAI({ baseURL: server.base + "/v1", apiKey: "nope", maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  const other = await client.completions.create({ model: "gpt-4", prompt: "x", max_tokens: 2 });
  assert.equal(other.model, "tiny");
  assert.ok(other.timings.predicted_n === 2, "llama-server's timings");
  await assert.rejects(
    client.completions.create({ model: "tiny", prompt: "x", max_tokens: 2, n: 17 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === "n");
});

const chatMsg = [{ role: "user", content: "Tell me about a dog." }];

test("implemented fields: logprobs, echo, penalties, logit_bias, n, seed, stop, user", async () => {
  const chat = await client.chat.completions.create({
    model: "tiny", messages: chatMsg, max_completion_tokens: 12, temperature: 0, logprobs: true,
    top_logprobs: 2, presence_penalty: 0.5, frequency_penalty: 0.5, logit_bias: { "5": -100 },
    seed: 1, stop: ["\n\n"], user: "u1", store: false, service_tier: "auto" });
  const content = chat.choices[0].logprobs.content;
  assert.equal(content.length, chat.usage.completion_tokens);
  assert.equal(content.map((t) => t.token).join(""), chat.choices[0].message.content);
  for (const t of content) {
    assert.equal(t.top_logprobs.length, 2);
    assert.equal(t.top_logprobs[0].logprob, t.logprob);
  }
  const comp = await client.completions.create({
    model: "tiny", prompt: "Lily saw a", max_tokens: 6, temperature: 0, logprobs: 1, echo: true });
  assert.ok(comp.choices[0].text.startsWith("Lily saw a"));
  const lp = comp.choices[0].logprobs;
  const generated = lp.tokens.slice(comp.usage.prompt_tokens).join("");
  assert.equal(lp.tokens.length, comp.usage.prompt_tokens + 6);
  assert.ok(comp.choices[0].text.endsWith(generated));
  assert.equal(comp.choices[0].logprobs.token_logprobs[0], null);
  const many = await client.completions.create({
    model: "tiny", prompt: "The cat", max_tokens: 8, temperature: 1, n: 2, best_of: 2, seed: 9 });
  assert.equal(many.choices.length, 2);
  assert.deepEqual(many.choices.map((c) => c.index), [0, 1]);
  assert.equal(many.usage.completion_tokens, 16);
});

test("response_format json_schema and json_object give valid JSON with speculation", async () => {
  const schema = { type: "object", properties: { ok: { type: "boolean" },
                   pets: { type: "array", items: { enum: ["cat", "dog"] }, maxItems: 2 } },
                   required: ["ok", "pets"], additionalProperties: false };
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({
      model: "tiny", messages: chatMsg, max_tokens: 450, temperature: 0.8, seed,
      response_format: { type: "json_schema", json_schema: { name: "x", schema } } });
    const v = JSON.parse(r.choices[0].message.content);
    assert.equal(typeof v.ok, "boolean");
    assert.ok(Array.isArray(v.pets) && v.pets.length <= 2);
    assert.deepEqual(Object.keys(v).sort(), ["ok", "pets"]);
  }
  // stories260K closes a free-form object only when "}" (token 128) is favoured.
  const o = await client.completions.create({
    model: "tiny", prompt: "Once", max_tokens: 450, temperature: 0.7, seed: 1,
    logit_bias: { "128": 15 }, response_format: { type: "json_object" } });
  assert.equal(o.choices[0].finish_reason, "stop");
  const v = JSON.parse(o.choices[0].text);
  assert.equal(typeof v, "object");
});

test("stream_options.include_usage: a last chunk with no choices and the usage", async () => {
  const chunks = [];
  for await (const c of await client.chat.completions.create({
    model: "tiny", messages: chatMsg, max_tokens: 10, temperature: 0, stream: true,
    stream_options: { include_usage: true } })) chunks.push(c);
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.completion_tokens, 10);
  assert.ok(last.usage.speculative.drafted > 0);
  for (const c of chunks.slice(0, -1)) assert.equal(c.usage, undefined);
  const plain = [];
  for await (const c of await client.chat.completions.create({
    model: "tiny", messages: chatMsg, max_tokens: 10, temperature: 0, stream: true })) plain.push(c);
  for (const c of plain) assert.equal(c.usage, undefined);
});

test("refused fields: a 400 naming each", async () => {
  const refusedChat = {
    tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }],
    tool_choice: "required",
    functions: [{ name: "f" }],
    function_call: "auto",
    audio: { voice: "alloy", format: "wav" },
    modalities: ["text", "audio"],
    prediction: { type: "content", content: "x" },
    reasoning_effort: "low",
    verbosity: "high",
    web_search_options: {},
    metadata: { a: "b" },
    store: true,
    service_tier: "flex",
  };
  for (const [name, value] of Object.entries(refusedChat)) {
    await assert.rejects(
      client.chat.completions.create({ model: "tiny", messages: chatMsg, max_tokens: 2, [name]: value }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === name, name);
  }
  for (const [name, value] of Object.entries({ suffix: "end", best_of: 3 })) {
    await assert.rejects(
      client.completions.create({ model: "tiny", prompt: "x", max_tokens: 2, [name]: value }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === name, name);
  }
});
