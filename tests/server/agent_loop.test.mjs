// An agent loop with the official OpenAI SDK on a model with Qwen3's real vocabulary (151,936
// tokens, byte-level BPE), special tokens and chat template: a tiny random-weight qwen3 target
// and its one-block draft, written by scripts/models/make_models.py vocab from
// ../shared/vocab/ggml-vocab-qwen3.gguf. The loop is what agents do: a forced tool call (its
// arguments under the grammar built from the tool's JSON schema), the tool's result fed back as
// a `tool` message through the template, then an answer with tool_choice "auto"; streamed and
// not. Served with the draft model, or with n-gram prompt lookup, every reply is the same as
// without speculation (greedy), and the draft was used.
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";
import { startServer, sharedPath } from "./server_helper.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const MAKE = path.join(HERE, "..", "..", "scripts", "models", "make_models.py");
const PYTHON = "/usr/bin/python3";

const WEATHER = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city now.",
    parameters: {
      type: "object",
      properties: {
        // An enum: a random-weight model never closes a free string on its own.
        city: { type: "string", enum: ["Paris", "London", "Tokyo"] },
        unit: { type: "string", enum: ["celsius", "fahrenheit"] },
      },
      required: ["city", "unit"],
      additionalProperties: false,
    },
  },
};
const TIME = {
  type: "function",
  function: { name: "get_time", parameters: { type: "object", properties: {}, additionalProperties: false } },
};
const TOOLS = [WEATHER, TIME];

let plain, spec, ngram, target;

before(async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "specula-agent-"));
  const vocab = sharedPath("vocab/ggml-vocab-qwen3.gguf");
  target = path.join(dir, "qwen3-vocab-l2.gguf");
  const draft = path.join(dir, "qwen3-vocab-l1.gguf");
  execFileSync(PYTHON, [MAKE, "vocab", vocab, target, "--layers", "2"], { stdio: "ignore" });
  execFileSync(PYTHON, [MAKE, "vocab", vocab, draft, "--layers", "1"], { stdio: "ignore" });
  const common = ["-m", target, "-t", "1", "-c", "4096", "--parallel", "2"];
  plain = await startServer(common);
  spec = await startServer([...common, "-md", draft, "--draft-max", "4"]);
  ngram = await startServer([...common, "--spec-type", "ngram", "--draft-max", "4"]);
});
after(async () => {
  if (plain) await plain.stop();
  if (spec) await spec.stop();
  if (ngram) await ngram.stop();
});

const clientOf = (s) => new OpenAI({ baseURL: s.base + "/v1", apiKey: "none", maxRetries: 0 });

// The streamed reply folded into the shape of a non-streamed message.
async function streamed(client, body) {
  const msg = { content: "", reasoning: "", tool_calls: [] };
  let finish = null;
  for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
    for (const c of chunk.choices) {
      const d = c.delta;
      if (d.content) msg.content += d.content;
      if (d.reasoning_content) msg.reasoning += d.reasoning_content;
      for (const tc of d.tool_calls ?? []) {
        const slot = (msg.tool_calls[tc.index] ??= { id: "", name: "", arguments: "" });
        if (tc.id) slot.id = tc.id;
        if (tc.function?.name) slot.name += tc.function.name;
        if (tc.function?.arguments) slot.arguments += tc.function.arguments;
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { msg, finish };
}

// One agent run against a server: the forced call, the tool's result, the answer. Returns what
// a comparison needs (tool call ids are random per reply and left out).
async function agentRun(server) {
  const client = clientOf(server);
  const messages = [
    { role: "system", content: "You are a weather assistant. Use the tools." },
    { role: "user", content: "What is the weather in Paris right now, in celsius?" },
  ];
  const base = { model: "qwen3", tools: TOOLS, temperature: 0, max_tokens: 64 };
  // "required" over both tools: the call names one, and its arguments follow that tool's schema.
  const first = await client.chat.completions.create({ ...base, messages, tool_choice: "required" });
  const choice = first.choices[0];
  assert.equal(choice.finish_reason, "tool_calls");
  const calls = choice.message.tool_calls;
  assert.ok(calls.length >= 1);
  for (const c of calls) {
    assert.equal(c.type, "function");
    assert.ok(["get_weather", "get_time"].includes(c.function.name), c.function.name);
    const args = JSON.parse(c.function.arguments);  // valid JSON, as the schema shapes it
    if (c.function.name === "get_weather") {
      assert.deepEqual(Object.keys(args).sort(), ["city", "unit"]);
      assert.ok(["Paris", "London", "Tokyo"].includes(args.city), args.city);
      assert.ok(["celsius", "fahrenheit"].includes(args.unit), args.unit);
    } else {
      assert.deepEqual(args, {});
    }
    assert.ok(c.id.length > 0);
  }
  // The same request streamed: the same calls, assembled from deltas.
  const s1 = await streamed(client, { ...base, messages, tool_choice: "required" });
  assert.equal(s1.finish, "tool_calls");
  assert.deepEqual(s1.msg.tool_calls.map((c) => [c.name, c.arguments]),
                   calls.map((c) => [c.function.name, c.function.arguments]));

  // A named tool among several: the call must be that one.
  const named = await client.chat.completions.create({
    ...base, messages, tool_choice: { type: "function", function: { name: "get_weather" } } });
  const namedCall = named.choices[0].message.tool_calls;
  assert.equal(namedCall.length, 1);
  assert.equal(namedCall[0].function.name, "get_weather");

  // The results go back as `tool` messages after the assistant's calls.
  messages.push(choice.message);
  for (const c of calls)
    messages.push({ role: "tool", tool_call_id: c.id,
                    content: JSON.stringify({ temperature: 21, condition: "sunny" }) });
  const second = await client.chat.completions.create({ ...base, messages, tool_choice: "auto",
                                                        max_tokens: 24 });
  const answer = second.choices[0];
  assert.ok(["stop", "length", "tool_calls"].includes(answer.finish_reason), answer.finish_reason);
  assert.ok(second.usage.prompt_tokens > first.usage.prompt_tokens,
            "the tool results are in the second prompt");
  const s2 = await streamed(client, { ...base, messages, tool_choice: "auto", max_tokens: 24 });
  assert.equal(s2.msg.content, answer.message.content ?? "");
  // tool_choice "none": text only, never a call.
  const none = await client.chat.completions.create({ ...base, messages, tool_choice: "none",
                                                      max_tokens: 24 });
  assert.ok(!none.choices[0].message.tool_calls?.length);
  return {
    calls: calls.map((c) => [c.function.name, c.function.arguments]),
    named: namedCall[0].function.arguments,
    answer: [answer.finish_reason, answer.message.content, answer.message.reasoning_content,
             (answer.message.tool_calls ?? []).map((c) => [c.function.name, c.function.arguments])],
    none: none.choices[0].message.content,
    usage: [first.usage.prompt_tokens, first.usage.completion_tokens, second.usage.prompt_tokens,
            second.usage.completion_tokens],
  };
}

test("an OpenAI SDK agent loop on Qwen3's vocabulary and template, with and without a draft", async () => {
  const without = await agentRun(plain);
  const withDraft = await agentRun(spec);
  assert.deepEqual(withDraft, without);
  assert.deepEqual(await agentRun(ngram), without);  // n-gram prompt lookup: the same
  // The draft did propose tokens (the speculative counters of the served replies).
  const m = await (await fetch(spec.base + "/metrics")).text();
  const drafted = Number(/^vllm:spec_decode_num_draft_tokens_total(?:\{[^}]*\})?\s+(\S+)/m.exec(m)?.[1]);
  assert.ok(drafted > 0, "no draft tokens in /metrics:\n" + m.slice(0, 2000));
});

test("the Qwen3 tokenizer round-trips through /tokenize and /detokenize", async () => {
  const text = "Héllo wörld! 你好，世界 <tool_call> 🌍 \n\tcode();";
  const tok = await (await fetch(plain.base + "/tokenize", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ content: text }) })).json();
  assert.ok(tok.tokens.length > 5 && tok.tokens.every((t) => t >= 0 && t < 151936));
  const back = await (await fetch(plain.base + "/detokenize", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ tokens: tok.tokens }) })).json();
  assert.equal(back.content, text);
});
