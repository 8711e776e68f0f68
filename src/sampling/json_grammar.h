// JSON grammars for structured output: what OpenAI's `response_format` asks for, compiled into a
// small graph of value nodes that GrammarState (grammar_state.h) walks byte by byte.
//
//  - json_object_grammar(): `{"type": "json_object"}`: any JSON object (values of any type).
//  - json_schema_grammar(schema): `{"type": "json_schema", "json_schema": {"schema": S}}`. The
//    supported subset of JSON Schema: `type` (a name or an array of names: object, array, string,
//    number, integer, boolean, null), `properties`, `required`, `additionalProperties` (false,
//    true or a schema; by default false where `properties` names any, as llama.cpp's and vLLM's
//    grammars close such objects, else true), `items`, `minItems`, `maxItems`, `enum`, `const`,
//    `anyOf` / `oneOf` whose branches have different JSON types (e.g. {"anyOf": [{"type":
//    "string"},
//    {"type": "null"}]}, pydantic's Optional; number and integer count as one type), and the
//    annotations `title`, `description`, `default`, `examples`, `$schema`, `$id`, `$comment`
//    (which constrain nothing); `$ref` to a schema inside the same one (`#/$defs/Name`,
//    `#/definitions/Name`, any `#` JSON pointer; as pydantic writes nested models), except a
//    recursive one. For strings: `minLength` / `maxLength` (in code points of the decoded
//    string), `pattern` (an ECMAScript regex searched anywhere unless anchored; the subset in
//    string_rule.h) and `format` (date, time, date-time, uuid), together or alone (but not
//    `pattern` with `format`); a combination no string satisfies is refused. Any other keyword
//    (`allOf`, `minimum`, `contentEncoding`, ...), format (email, uri, ...) or regex construct
//    (backreferences, lookaround, \b, ...) is refused with a specula::Error naming it and where
//    it is (a JSON pointer such as /properties/age), never silently ignored. A schema without
//    `type` (and without enum / const) accepts any value.
//
// The output the grammar admits is JSON text that nlohmann::json::parse accepts and that matches
// the schema, with these limits (so that a model cannot loop forever on filler):
//  - between tokens of the JSON, llama.cpp's gap: nothing, one space, or a newline and at most
//    `max_ws` spaces or tabs of indent; none after the top-level value (only an end-of-generation
//    token may follow it);
//  - values of unconstrained type nest at most `max_depth` containers deep;
//  - integer parts of at most 16 digits and at most 16 fraction digits (llama.cpp's bounds), 2
//    exponent digits (nlohmann refuses numbers that overflow a double);
//  - strings are valid UTF-8 without control bytes; \u escapes of surrogates are not produced
//    (non-BMP characters come as raw UTF-8);
//  - a pattern has at most 63 positions (characters and classes once counted repetitions are
//    expanded: [a-z]{8} is 8); format date produces no February 29, time and date-time no leap
//    second and always a time zone (Z or +-HH:MM); see string_rule.h;
//  - an object's keys are distinct when the schema names its properties; inside such an object a
//    key cannot contain escapes (so a key cannot spell a named property in disguise);
//  - `enum` / `const` values are matched in nlohmann's compact dump form (`{"a":1}`, `"x"`, `1.5`).
//
// A `$ref` target is compiled once per grammar and shared by every use (the node graph is a DAG,
// not the tree the references unfold to), so 8 properties x 8 levels of `$defs` that each refer to
// the next level cost 8 x 8 nodes, not 8^8. What one compile may cost is bounded by the options'
// max_nodes, max_string_cells (the string rules' tables) and max_compile_ms; past one of them the
// schema is refused with a specula::Error naming the limit and its value.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "sampling/string_rule.h"

namespace specula {

struct JsonGrammarOptions {
    int max_ws = 20;     // indent bytes after a gap's newline (llama.cpp's 20), at most 64
    int max_depth = 16;  // container nesting of unconstrained values; also the schema's limit
    // The grammar's size and the work of compiling it (one request's schema or tools).
    int max_nodes = 16384;                      // JsonNode count, $ref targets counted once
    size_t max_string_cells = size_t(1) << 22;  // all StringRule::dist tables (16 MiB)
    int max_compile_ms = 1000;                  // wall time of the compile
};

// Bit set of JSON types a node admits.
enum JsonType : uint8_t {
    kJsonObject = 1,
    kJsonArray = 2,
    kJsonString = 4,
    kJsonNumber = 8,    // any number
    kJsonInteger = 16,  // integers only (no fraction or exponent); implied by kJsonNumber
    kJsonBoolean = 32,
    kJsonNull = 64,
    kJsonAny = 127,
};

struct JsonNode {
    uint8_t types = kJsonAny;
    // Object: named properties, sorted by name; `required` is a bit per property.
    std::vector<std::string> prop_names;
    std::vector<int32_t> prop_nodes;
    uint64_t required = 0;
    int32_t additional = -1;  // node of other keys' values; -1: no other keys allowed
    // Array.
    int32_t items = -1;                     // node of the items
    int32_t min_items = 0, max_items = -1;  // -1: unbounded
    // enum / const: the only admitted values, as sorted compact JSON texts; empty: not a literal.
    std::vector<std::string> literals;
    // anyOf / oneOf: alternative nodes, of pairwise different JSON types; empty: not a union.
    std::vector<int32_t> branches;
    // minLength / maxLength / pattern / format: index into JsonGrammar::string_rules; -1: none.
    int32_t string_rule = -1;
    // The fewest bytes of a complete value (GrammarState::min_remaining), computed once when the
    // node is made; at most kMaxMinLen (a shared node's bound can grow exponentially with depth).
    size_t min_len = 1;
};
inline constexpr size_t kMaxMinLen = size_t(1) << 40;

// One framed value of a grammar with alternatives: literal bytes, a value of node `root`, bytes.
struct JsonAlternative {
    std::string prefix;
    int32_t root = 0;
    std::string suffix;
};

struct JsonGrammar {
    std::vector<JsonNode> nodes;
    int32_t root = 0;
    std::vector<StringRule> string_rules;
    JsonGrammarOptions options;
    // Literal bytes before and after the top-level value (a tool call's markup, e.g.
    // "<tool_call>\n" and "\n</tool_call>"); no whitespace is admitted around them.
    std::string prefix, suffix;
    // When not empty, the output is one of these instead of (prefix, root, suffix): the one
    // whose prefix it starts with. Sorted by prefix; no prefix is a prefix of another, so the
    // alternative is known when its prefix is complete (a forced call to one of several tools:
    // `{"name": "get_weather", "arguments": ` picks the arguments' schema).
    std::vector<JsonAlternative> alternatives;
};

// `{"type": "json_object"}`.
std::shared_ptr<const JsonGrammar> json_object_grammar(const JsonGrammarOptions& opt = {});

// A JSON Schema (the subset above). Throws specula::Error naming the unsupported keyword or bad
// value and its JSON pointer, e.g. "json_schema: unsupported keyword 'allOf' at /properties/id".
// `ref_base`: the JSON pointer of the sub-schema that `$ref`s resolve against ("#" is it); ""
// for the whole schema. A tool's `parameters` wrapped in a call object resolve their own $defs.
std::shared_ptr<const JsonGrammar> json_schema_grammar(const nlohmann::json& schema,
                                                       const JsonGrammarOptions& opt = {},
                                                       const std::string& ref_base = "");

// One of several schemas, each framed by literal bytes (see JsonGrammar::alternatives). Throws
// specula::Error for a bad schema (as above) or when one prefix is a prefix of another (two
// alternatives could not be told apart), naming both.
struct FramedSchema {
    std::string prefix;
    const nlohmann::json* schema;  // not null; read during the call only
    std::string suffix;
};
std::shared_ptr<const JsonGrammar> json_schema_alternatives(const std::vector<FramedSchema>& list,
                                                            const JsonGrammarOptions& opt = {});

// From an OpenAI `response_format` object: {"type": "text"} gives nullptr (no constraint),
// {"type": "json_object"}, {"type": "json_schema", "json_schema": {"schema": {...}, ...}}.
// Throws specula::Error naming the field (response_format.type, response_format.json_schema...).
std::shared_ptr<const JsonGrammar> response_format_grammar(const nlohmann::json& response_format,
                                                           const JsonGrammarOptions& opt = {});

}  // namespace specula
