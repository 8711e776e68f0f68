// The official OpenAI Node SDK against `specula serve` (stories260K target, llama2xs draft):
// models, completions and chat, streaming and not, greedy output equal to `specula run --temp 0`,
// the speculative usage block, and the SDK's typed errors for a wrong key and an unknown model.
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startServer, runGreedy, TARGET, DRAFT } from "./server_helper.mjs";

let server, client;
const KEY = "test-key-123";

before(async () => {
  server = await startServer(["-m", TARGET(), "-md", DRAFT(), "--draft", "4", "--parallel", "2",
                              "--api-key", KEY, "--served-model-name", "tiny"]);
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

test("errors: wrong key is 401, unknown model is 404, bad field is 400", async () => {
  const bad = new OpenAI({ baseURL: server.base + "/v1", apiKey: "nope", maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  await assert.rejects(
    client.completions.create({ model: "gpt-4", prompt: "x", max_tokens: 2 }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
  await assert.rejects(
    client.completions.create({ model: "tiny", prompt: "x", max_tokens: 2, n: 3 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === "n");
});
