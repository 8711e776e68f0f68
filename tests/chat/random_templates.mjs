// Random templates for the differential test: expressions over literals, context values,
// operators, filters, tests and methods, inside {{ }}, if, for and set, from a seeded generator
// (mulberry32), so every run draws the same templates. Many fail in both engines (type errors);
// what the test checks is that every template the reference renders, Specula renders the same.
export const context = {
  d: { k: 1, j: "v" },
  l: [3, 1, 2],
  s: "hello World",
  n: 7,
  f: 1.5,
  m: { role: "user", content: " hi ", tool_calls: [{ function: { name: "f", arguments: { a: 1 } } }] },
  ms: [{ role: "a" }, { role: "b", content: "x" }],
};

const atoms = ["1", "0", "-2", "2.5", "0.0", "3", "-1", "1.25", "'ab'", "''", "' x '", "'Ab Cd-ef'",
  "'  x\\ny  '", "\"é🙂\"", "true", "false", "none", "undef", "[1, 'a', none]", "[]",
  "{'k': 1, 'j': 'v'}", "{}", "d", "l", "s", "n", "f", "ms", "(1, 2)", "l[0]", "d.k", "d['j']", "s[1:]",
  "l[::-1]", "m.content", "m.tool_calls"];
const binops = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">", "<=", ">=", "and", "or", "in",
  "not in", "**"];
const filters = ["length", "upper", "lower", "trim", "title", "capitalize", "first", "last", "join",
  "join(', ')", "tojson", "tojson(indent=2)", "string", "int", "float", "abs", "list", "reverse", "sort",
  "unique", "items", "default('D')", "default('D', true)", "indent(2)", "replace('a', 'b')", "safe",
  "dictsort", "map(attribute='role')", "selectattr('role')", "length"];
const tests = ["defined", "undefined", "none", "string", "number", "integer", "mapping", "iterable",
  "sequence", "boolean", "true", "false", "odd", "even", "lower", "upper"];
const methods = [".strip()", ".upper()", ".split()", ".split('a')", ".startswith('a')", ".endswith('b')",
  ".items()", ".keys()", ".get('k')", ".get('z', 3)", ".title()", ".replace('a', 'X')", ".lstrip()",
  ".rstrip()", ".length"];

// `depth` caps expression nesting (0: single values, so the statements around them mostly render).
export function generate(seed, count, depth = 3) {
  let state = seed;
  const rnd = () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const pick = (a) => a[Math.floor(rnd() * a.length)];
  const expr = (want) => {
    const d = Math.min(want, depth);
    if (d <= 0) return pick(atoms);
    switch (Math.floor(rnd() * 8)) {
      case 0: return `(${expr(d - 1)} ${pick(binops)} ${expr(d - 1)})`;
      case 1: return `${expr(d - 1)} | ${pick(filters)}`;
      case 2: return `(${expr(d - 1)} is ${rnd() < 0.3 ? "not " : ""}${pick(tests)})`;
      case 3: return `(${expr(d - 1)})${pick(methods)}`;
      case 4: return `(${expr(d - 1)} if ${expr(d - 1)} else ${expr(d - 1)})`;
      case 5: return `(not ${expr(d - 1)})`;
      case 6: return `[${expr(d - 1)}, ${expr(d - 1)}]`;
      default: return pick(atoms);
    }
  };
  const ws = () => pick(["", "-"]);
  const text = () => pick(["", " ", "\n", "  a \n ", "\t", "x"]);
  const stmt = () => {
    switch (Math.floor(rnd() * 14)) {
      case 6: return `${text()}{%${ws()} for x in ${expr(1)} ${ws()}%}${text()}{{${ws()} loop.index0 ~ loop.first ~ loop.last ${ws()}}}${text()}{%${ws()} if loop.index == 2 %}{% ${pick(["break", "continue"])} %}{% endif ${ws()}%}{{ x }}{%${ws()} else ${ws()}%}E{%${ws()} endfor ${ws()}%}${text()}`;
      case 7: return `{% set ns = namespace(a=${expr(1)}) %}{% for y in [1, 2] %}{% set ns.a = ns.a ~ y %}{% endfor %}{{ ns.a }}`;
      case 8: return `{% macro mm(p, q=${expr(1)}) %}[{{ p }}|{{ q }}]{% endmacro %}{{ mm(${expr(1)}) }}{{ mm(1, q=${expr(1)}) }}`;
      case 9: return `{% filter ${pick(["upper", "trim", "lower", "title"])} %}${text()}{{ ${expr(1)} }}${text()}{% endfilter %}`;
      case 10: return `${text()}{#${ws()} c ${ws()}#}${text()}{{${ws()} ${expr(1)} ${ws()}}}${text()}`;
      case 11: return `{% for a, b in ${pick(["d.items()", "[[1, 2], [3, 4]]", "ms | map(attribute='role') | list", "[(1, 2)]"])} %}{{ a }}={{ b }};{% endfor %}`;
      case 12: return `{% set blk %}${text()}{{ ${expr(1)} }}${text()}{% endset %}{{ blk | length }}:{{ blk }}`;
      case 13: return `{% for x in ${expr(1)} if ${expr(1)} %}{{ x }}{{ loop.length }}{% endfor %}`;
      case 0: return `{{ ${expr(2)} }}`;
      case 1: return `{% if ${expr(2)} %}A{{ ${expr(1)} }}{% else %}B{% endif %}`;
      case 2: return `{% for x in ${expr(1)} %}{{ loop.index }}{{ x }}{% endfor %}`;
      case 3: return `{% set v = ${expr(2)} %}{{ v }}`;
      case 4: return ` text\n  {%- if true %} t {% endif -%}\n`;
      default: return `{{ ${expr(3)} }}`;
    }
  };
  const out = [];
  for (let i = 0; i < count; i++) out.push(stmt() + stmt() + stmt());
  return out;
}
