// The JSON grammar's string keywords (minLength, maxLength, pattern, format) against ajv +
// ajv-formats, the JSON Schema validator most clients use: build/bin/schema_walk
// (SPECULA_SCHEMA_WALK) walks the grammar of each schema at random; every walked text must parse
// and be valid for ajv. For random patterns of the supported subset (with random length limits)
// the grammar must also accept exactly the strings ajv accepts, over random strings and near
// misses of the walked ones. Constructs outside the subset must be refused by name.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import Ajv from "ajv";
import addFormats from "ajv-formats";

const WALK = process.env.SPECULA_SCHEMA_WALK ?? new URL("../../build/bin/schema_walk", import.meta.url).pathname;

const ajv = new Ajv({ strict: false });
addFormats(ajv);

function run(cases) {
  const r = spawnSync(WALK, [], { input: JSON.stringify({ cases }), maxBuffer: 1 << 28 });
  assert.equal(r.status, 0, `schema_walk failed: ${r.stderr}`);
  return JSON.parse(r.stdout.toString("utf8")).results;
}

function mulberry32(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const STRING_SCHEMAS = [
  { minLength: 2, maxLength: 4 },
  { minLength: 6 },
  { pattern: "^\\s*\\w+\\s*$" },
  { pattern: "a.c" },
  { pattern: "^[^\\s\"]{3}$" },
  { pattern: "^\\S+@\\S+\\.\\w{2,3}$", maxLength: 20 },
  { pattern: "^(?:\\+?\\d{1,3}[ -])?\\d{3}-\\d{4}$" },
  { pattern: "^[é€😀]+$", minLength: 2, maxLength: 3 },
  { pattern: "^\\u00e9?\\x41+$" },
  { pattern: "^.{2,5}$" },
  { pattern: "^[^\\s]{2,40}$", maxLength: 30 },
  { pattern: "^.{1,200}$", minLength: 3 },
  { pattern: "(cat|dog)s?$", maxLength: 10 },
  { format: "date" },
  { format: "time" },
  { format: "date-time" },
  { format: "uuid" },
  { format: "date-time", minLength: 25 },
];

test("walks over string keywords are valid for ajv", () => {
  const schemas = [
    ...STRING_SCHEMAS.map((s) => ({ type: "string", ...s })),
    {
      type: "object",
      properties: {
        sku: { type: "string", pattern: "^[A-Z]{3}-\\d{4}$" },
        tags: { type: "array", items: { type: "string", pattern: "^#\\w+$", maxLength: 8 }, maxItems: 3 },
        when: { anyOf: [{ type: "string", format: "date" }, { type: "null" }] },
        note: { type: "string", maxLength: 5 },
      },
      required: ["sku", "tags", "when", "note"],
      additionalProperties: { type: "string", format: "uuid" },
    },
  ];
  const results = run(schemas.map((schema, i) => ({ schema, walks: 40, seed: i + 1 })));
  let n = 0;
  results.forEach((r, i) => {
    assert.ok(!r.error, `schema ${JSON.stringify(schemas[i])} refused: ${r.error}`);
    const validate = ajv.compile(schemas[i]);
    for (const text of r.texts) {
      const value = JSON.parse(text);
      assert.ok(validate(value), `${JSON.stringify(schemas[i])}: ${text}: ${ajv.errorsText(validate.errors)}`);
      ++n;
    }
  });
  assert.ok(n >= 40 * schemas.length);
});

// Random patterns of the supported subset (valid for ajv's unicode regexes too).
const ATOMS = ["a", "b", "c", "x", "0", "9", "-", " ", "é", "😀", "\\d", "\\w", "\\s", "\\D", "\\W",
  "\\S", ".", "[a-c]", "[^a]", "[0-9_]", "[^\\s]", "[\\-x]", "\\u00e9", "[à-ÿ]", "\\.", "\\n"];
const QUANTS = ["*", "+", "?", "{2}", "{1,3}", "{0,2}", "{2,}", "*?", "+?", "{0,1}?"];
const ALPHABET = ["a", "b", "c", "x", "0", "9", "-", " ", "_", "é", "ü", "😀", "\n", "\t", ".", '"',
  "\\", "A", "€", "\u2028", "\u00a0"];

function pattern(rand, depth = 0) {
  const pick = (list) => list[Math.floor(rand() * list.length)];
  const r = rand();
  if (depth > 2 || r < 0.35) return pick(ATOMS);
  if (r < 0.6) return pattern(rand, depth + 1) + pattern(rand, depth + 1) + (rand() < 0.5 ? pattern(rand, depth + 1) : "");
  if (r < 0.75) return `(${rand() < 0.5 ? "?:" : ""}${pattern(rand, depth + 1)}|${pattern(rand, depth + 1)})`;
  return `(?:${pattern(rand, depth + 1)})${pick(QUANTS)}`;
}

function randomString(rand) {
  let s = "";
  const n = Math.floor(rand() * 9);
  for (let i = 0; i < n; ++i) s += ALPHABET[Math.floor(rand() * ALPHABET.length)];
  return s;
}

// Near misses: one code point inserted, removed or replaced.
function mutate(rand, s) {
  const cps = [...s];
  const i = Math.floor(rand() * (cps.length + 1));
  const c = ALPHABET[Math.floor(rand() * ALPHABET.length)];
  const op = rand();
  if (op < 0.33) cps.splice(i, 0, c);
  else if (op < 0.66) cps.splice(i, 1);
  else cps[Math.min(i, cps.length - 1)] = c;
  return cps.join("");
}

test("random patterns: the grammar accepts exactly what ajv accepts", () => {
  const rand = mulberry32(2024);
  const cases = [];
  for (let k = 0; k < 150; ++k) {
    const schema = { type: "string", pattern: (rand() < 0.5 ? "^" : "") + pattern(rand) + (rand() < 0.5 ? "$" : "") };
    if (k % 10 === 0) {  // one class counted past the position limit: ^X{n,m}$
      const n = Math.floor(rand() * 4);
      schema.pattern = `^${ATOMS[Math.floor(rand() * ATOMS.length)]}{${n},${n + 60 + Math.floor(rand() * 40)}}$`;
    }
    if (rand() < 0.3) schema.minLength = Math.floor(rand() * 4);
    if (rand() < 0.3) schema.maxLength = (schema.minLength ?? 0) + Math.floor(rand() * 6);
    cases.push({ schema, walks: 8, seed: k + 1 });
  }
  // First pass: walks (valid for ajv); second: verdicts on random strings and near misses.
  const first = run(cases);
  let refused = 0, empty = 0, compared = 0, valid = 0;
  const second = [];
  first.forEach((r, k) => {
    const validate = ajv.compile(cases[k].schema);
    const strings = [];
    for (let i = 0; i < 40; ++i) strings.push(randomString(rand));
    if (r.error) {
      // Too many positions, or no string at all within the limits (then ajv agrees on a sample).
      assert.match(r.error, /needs more than 63 positions|no string matches 'pattern'/, r.error);
      if (/no string matches/.test(r.error))
        for (const s of strings) assert.ok(!validate(s), `${JSON.stringify(cases[k].schema)} admits ${JSON.stringify(s)}`);
      ++refused;
      empty += /no string matches/.test(r.error);
      return;
    }
    for (const text of r.texts) {
      const value = JSON.parse(text);
      assert.ok(validate(value), `${JSON.stringify(cases[k].schema)}: ${text}`);
      for (let i = 0; i < 5; ++i) strings.push(mutate(rand, value));
    }
    second.push({ k, strings, case: { schema: cases[k].schema, checks: strings.map((s) => JSON.stringify(s)) } });
  });
  const verdicts = run(second.map((s) => s.case));
  second.forEach(({ k, strings }, j) => {
    const validate = ajv.compile(cases[k].schema);
    strings.forEach((s, i) => {
      const expect = validate(s);
      assert.equal(verdicts[j].accepted[i], expect,
        `${JSON.stringify(cases[k].schema)} on ${JSON.stringify(s)}: ajv ${expect}`);
      ++compared;
      valid += expect;
    });
  });
  console.log(`${cases.length} patterns (${refused} refused, ${empty} of them matching no string), ${compared} strings compared, ${valid} valid`);
  assert.ok(refused < cases.length / 5);
  assert.ok(valid > compared / 10);
});

test("constructs outside the subset are refused by name", () => {
  const cases = [
    ["(a)\\1", "a backreference"],
    ["(?=a)b", "lookaround"],
    ["(?!a)b", "lookaround"],
    ["(?<=a)b", "lookaround"],
    ["\\bword", "the word boundary \\b"],
    ["\\p{L}", "the escape \\p"],
    ["a^", "'^' not at the start"],
    ["(a$)", "'$' not at the end"],
  ];
  const formats = ["email", "uri", "hostname", "ipv4", "duration"];
  const results = run([
    ...cases.map(([p]) => ({ schema: { type: "object", properties: { s: { type: "string", pattern: p } } } })),
    ...formats.map((f) => ({ schema: { type: "string", format: f } })),
  ]);
  cases.forEach(([p, what], i) => {
    assert.doesNotThrow(() => new RegExp(p, "u"), p);  // a pattern ajv would take
    assert.ok(results[i].error?.includes("'pattern' at /properties/s"), `${p}: ${results[i].error}`);
    assert.ok(results[i].error.includes(what), `${p}: ${results[i].error}`);
  });
  formats.forEach((f, i) => {
    const e = results[cases.length + i].error;
    assert.ok(e?.includes(`format "${f}" at / is not supported`), `${f}: ${e}`);
  });
});
