// JSON Schema subset -> JsonGrammar node graph. Node 0 is the unconstrained value (any type, any
// keys, any items: it refers to itself); each schema level adds one node, a `$ref` target once.
#include "sampling/json_grammar.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "common/clock.h"
#include "common/error.h"

namespace specula {

namespace {

using json = nlohmann::json;

constexpr int32_t kAnyNode = 0;
constexpr int kMaxProperties = 64;  // JsonNode::required / the matcher's seen set are 64-bit

const std::set<std::string>& annotations() {
    // $defs / definitions only hold schemas for $ref: by themselves they constrain nothing.
    static const std::set<std::string> s = {"title",    "description", "default",
                                            "examples", "$schema",     "$id",
                                            "$comment", "$defs",       "definitions"};
    return s;
}

const std::set<std::string>& supported() {
    static const std::set<std::string> s = {
        "type",      "properties", "required", "additionalProperties",
        "items",     "minItems",   "maxItems", "enum",
        "const",     "anyOf",      "oneOf",    "minLength",
        "maxLength", "pattern",    "format"};
    return s;
}

std::string where(const std::string& ptr) {
    return ptr.empty() ? "/" : ptr;
}

uint8_t type_bit(const json& name, const std::string& ptr) {
    if (!name.is_string())
        fail("json_schema: 'type' at ", where(ptr), " must be a string or array");
    const std::string& s = name.get_ref<const std::string&>();
    if (s == "object") return kJsonObject;
    if (s == "array") return kJsonArray;
    if (s == "string") return kJsonString;
    if (s == "number") return kJsonNumber | kJsonInteger;
    if (s == "integer") return kJsonInteger;
    if (s == "boolean") return kJsonBoolean;
    if (s == "null") return kJsonNull;
    fail("json_schema: unknown type '", s, "' at ", where(ptr),
         " (object, array, string, number, integer, boolean, null)");
}

uint8_t type_of(const json& v) {
    switch (v.type()) {
        case json::value_t::object:
            return kJsonObject;
        case json::value_t::array:
            return kJsonArray;
        case json::value_t::string:
            return kJsonString;
        case json::value_t::boolean:
            return kJsonBoolean;
        case json::value_t::null:
            return kJsonNull;
        case json::value_t::number_float:
            return kJsonNumber;
        default:
            return kJsonInteger;  // number_integer / number_unsigned
    }
}

int32_t count_field(const json& s, const char* key, const std::string& ptr) {
    const json& v = s.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
        fail("json_schema: '", key, "' at ", where(ptr), " must be a non-negative integer");
    return int32_t(v.get<int64_t>());
}

bool needs_escape(const std::string& s) {
    for (unsigned char c : s)
        if (c < 0x20 || c == '"' || c == '\\') return true;
    return false;
}

size_t sat_add(size_t a, size_t b) {
    return std::min(a + b, kMaxMinLen);  // both <= kMaxMinLen: no overflow
}

size_t sat_mul(size_t a, size_t b) {
    return a != 0 && b > kMaxMinLen / a ? kMaxMinLen : std::min(a * b, kMaxMinLen);
}

class Compiler {
  public:
    explicit Compiler(const JsonGrammarOptions& opt) : opt_(opt), t0_(clock_type::now()) {
        g_.options = opt;
        JsonNode any;
        any.additional = kAnyNode;
        any.items = kAnyNode;
        any.min_len = 1;  // a one-digit number
        g_.nodes.push_back(any);
        height_.push_back(0);
    }

    explicit Compiler(const JsonGrammarOptions& opt, const json& root) : Compiler(opt) {
        root_ = &root;
    }

    int32_t compile(const json& s, const std::string& ptr, int depth) {
        if (depth >= opt_.max_depth)  // its container would be container max_depth + 1
            fail("json_schema: nested deeper than ", opt_.max_depth, " levels at ", where(ptr));
        check_time(ptr);
        if (s.is_boolean()) {
            if (s.get<bool>()) return kAnyNode;
            fail("json_schema: schema 'false' at ", where(ptr), " admits no value");
        }
        if (!s.is_object()) fail("json_schema: schema at ", where(ptr), " must be an object");
        if (s.contains("$ref")) return reference(s, ptr, depth);
        for (const auto& [k, v] : s.items()) {
            if (!supported().count(k) && !annotations().count(k))
                fail("json_schema: unsupported keyword '", k, "' at ", where(ptr));
        }
        if (s.contains("anyOf") || s.contains("oneOf")) return alternatives(s, ptr, depth);
        JsonNode n;
        if (s.contains("type")) {
            const json& t = s["type"];
            n.types = 0;
            if (t.is_array()) {
                if (t.empty()) fail("json_schema: empty 'type' array at ", where(ptr));
                for (const json& e : t) n.types |= type_bit(e, ptr);
            } else {
                n.types = type_bit(t, ptr);
            }
        }
        if (s.contains("enum") || s.contains("const")) {
            literals(s, ptr, n);
        } else {
            object_rules(s, ptr, depth, n);
            array_rules(s, ptr, depth, n);
            if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") ||
                s.contains("format"))
                n.string_rule = string_rule(s, ptr);
        }
        return add_node(std::move(n), ptr);
    }

    JsonGrammar take() { return std::move(g_); }
    // The schema that `$ref`s of the next compile() point into.
    void set_root(const json& root) {
        root_ = &root;
        shared_.clear();
    }

  private:
    void check_time(const std::string& ptr) const {
        const double ms = ms_since(t0_);
        if (ms > opt_.max_compile_ms)
            fail("json_schema: compiling the grammar took over ", opt_.max_compile_ms,
                 " ms (the limit on a schema's compile time), stopped at ", where(ptr));
    }

    int32_t string_rule(const json& s, const std::string& ptr) {
        g_.string_rules.push_back(compile_string_rule(s, ptr));
        string_cells_ += g_.string_rules.back().dist.size();
        if (string_cells_ > opt_.max_string_cells)
            fail("json_schema: the string rules' tables need more than ", opt_.max_string_cells,
                 " cells (the limit on a schema's minLength / maxLength / pattern tables), at ",
                 where(ptr));
        return int32_t(g_.string_rules.size() - 1);
    }

    // Appends a finished node: its shortest value and the nesting below it, from its children
    // (made before it); refused past max_nodes.
    int32_t add_node(JsonNode n, const std::string& ptr) {
        if (g_.nodes.size() >= size_t(opt_.max_nodes))
            fail("json_schema: the grammar needs more than ", opt_.max_nodes,
                 " nodes (the limit on a schema's size; a $ref target counts once), at ",
                 where(ptr));
        int height = 0;
        for (int32_t b : n.branches) height = std::max(height, height_[size_t(b)]);
        for (int32_t c : n.prop_nodes) height = std::max(height, 1 + height_[size_t(c)]);
        for (int32_t c : {n.items, n.additional})
            if (c > kAnyNode) height = std::max(height, 1 + height_[size_t(c)]);
        n.min_len = shortest(n);
        g_.nodes.push_back(std::move(n));
        height_.push_back(height);
        return int32_t(g_.nodes.size() - 1);
    }

    // The fewest bytes of a value of `n` (its children's already known), saturating.
    size_t shortest(const JsonNode& n) const {
        const auto len = [&](int32_t c) { return g_.nodes[size_t(c)].min_len; };
        size_t m = kMaxMinLen;
        if (!n.branches.empty()) {
            for (int32_t b : n.branches) m = std::min(m, len(b));
            return m;
        }
        if (!n.literals.empty()) {
            for (const std::string& l : n.literals) m = std::min(m, l.size());
            return m;
        }
        if (n.types & (kJsonNumber | kJsonInteger)) m = 1;
        if (n.types & kJsonString) {
            const StringRule* r =
                n.string_rule >= 0 ? &g_.string_rules[size_t(n.string_rule)] : nullptr;
            m = std::min<size_t>(m, 2 + (r ? r->rest(r->initial(), 0) : 0));
        }
        if (n.types & (kJsonBoolean | kJsonNull)) m = std::min<size_t>(m, 4);
        if (n.types & kJsonArray) {
            const size_t k = size_t(n.min_items);
            m = std::min(m, k == 0 ? 2 : sat_add(1 + k, sat_mul(k, len(n.items))));
        }
        if (n.types & kJsonObject) {
            size_t total = 2, k = 0;
            for (size_t i = 0; i < n.prop_names.size(); ++i)
                if (n.required >> i & 1)
                    total =
                        sat_add(total, sat_add(n.prop_names[i].size() + 3, len(n.prop_nodes[i]))),
                    ++k;
            m = std::min(m, sat_add(total, k ? k - 1 : 0));
        }
        return m;
    }

    // {"$ref": "#/$defs/Name"} (or #/definitions/..., any JSON pointer into the same schema, "#"
    // itself): the schema it points to, compiled at its first use and shared by the later ones
    // (whose depth plus the target's own nesting must stay within max_depth). A reference that
    // leads back into itself (a recursive schema) is refused: the grammar's nesting must stay
    // bounded.
    int32_t reference(const json& s, const std::string& ptr, int depth) {
        for (const auto& [k, v] : s.items())
            if (k != "$ref" && !annotations().count(k))
                fail("json_schema: '", k, "' next to '$ref' at ", where(ptr), " is not supported");
        const json& r = s["$ref"];
        if (!r.is_string()) fail("json_schema: '$ref' at ", where(ptr), " must be a string");
        const std::string ref = r.get<std::string>();
        if (ref.empty() || ref[0] != '#')
            fail("json_schema: '$ref' \"", ref, "\" at ", where(ptr),
                 " is not supported (only references inside the schema, starting with #)");
        const json* target = nullptr;
        try {
            target = &root_->at(json::json_pointer(ref.substr(1)));
        } catch (const std::exception&) {
            fail("json_schema: '$ref' \"", ref, "\" at ", where(ptr),
                 " does not point into the schema");
        }
        if (std::find(open_refs_.begin(), open_refs_.end(), target) != open_refs_.end())
            fail("json_schema: recursive '$ref' \"", ref, "\" at ", where(ptr),
                 " is not supported");
        if (const auto it = shared_.find(target); it != shared_.end()) {
            if (depth + height_[size_t(it->second)] >= opt_.max_depth)
                fail("json_schema: nested deeper than ", opt_.max_depth, " levels at ", where(ptr),
                     " (through '$ref' \"", ref, "\")");
            return it->second;
        }
        open_refs_.push_back(target);
        const int32_t node = compile(*target, ref.substr(1), depth);
        open_refs_.pop_back();
        shared_.emplace(target, node);
        return node;
    }

    // anyOf / oneOf whose branches start with different JSON types (e.g. a type or null): the first
    // byte of the value picks the branch, so both keywords mean the same here.
    int32_t alternatives(const json& s, const std::string& ptr, int depth) {
        const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
        for (const auto& [k, v] : s.items())
            if (!annotations().count(k))
                if (k != key)
                    fail("json_schema: '", k, "' next to '", key, "' at ", where(ptr),
                         " is not supported");
        const json& alts = s[key];
        if (!alts.is_array() || alts.empty())
            fail("json_schema: '", key, "' at ", where(ptr), " must be a non-empty array");
        JsonNode u;
        u.types = 0;
        for (size_t i = 0; i < alts.size(); ++i) {
            const std::string bp = ptr + "/" + key + "/" + std::to_string(i);
            const int32_t b = compile(alts[i], bp, depth);
            const uint8_t t = first_types(b);
            // number and integer values start alike: they count as one kind here
            const uint8_t kind = t & kJsonInteger ? uint8_t(t | kJsonNumber | kJsonInteger) : t;
            const uint8_t seen = u.types & kJsonInteger ? uint8_t(u.types | kJsonNumber) : u.types;
            if (kind & seen)
                fail("json_schema: '", key, "' branches at ", where(ptr),
                     " share a JSON type (branch ", i, "); only branches of different types are ",
                     "supported");
            u.types |= t;
            u.branches.push_back(b);
        }
        return add_node(std::move(u), ptr);
    }

    // The JSON types a node's values can have.
    uint8_t first_types(int32_t node) const {
        const JsonNode& n = g_.nodes[size_t(node)];
        if (n.literals.empty()) return n.types;
        uint8_t t = 0;
        for (const std::string& l : n.literals) t |= type_of(json::parse(l));
        return t;
    }

    void literals(const json& s, const std::string& ptr, JsonNode& n) {
        for (const char* k : {"properties", "required", "additionalProperties", "items", "minItems",
                              "maxItems", "minLength", "maxLength", "pattern", "format"})
            if (s.contains(k))
                fail("json_schema: '", k, "' next to enum/const at ", where(ptr),
                     " is not supported");
        if (s.contains("enum") && s.contains("const"))
            fail("json_schema: both 'enum' and 'const' at ", where(ptr));
        std::vector<json> vals;
        if (s.contains("const")) {
            vals.push_back(s["const"]);
        } else {
            if (!s["enum"].is_array() || s["enum"].empty())
                fail("json_schema: 'enum' at ", where(ptr), " must be a non-empty array");
            vals.assign(s["enum"].begin(), s["enum"].end());
        }
        for (const json& v : vals) {
            if (!(type_of(v) & n.types))
                fail("json_schema: enum/const value ", v.dump(), " at ", where(ptr),
                     " does not have the schema's 'type'");
            n.literals.push_back(v.dump());
        }
        std::sort(n.literals.begin(), n.literals.end());
        n.literals.erase(std::unique(n.literals.begin(), n.literals.end()), n.literals.end());
    }

    void object_rules(const json& s, const std::string& ptr, int depth, JsonNode& n) {
        n.additional = kAnyNode;
        if (s.contains("properties")) {
            const json& props = s["properties"];
            if (!props.is_object())
                fail("json_schema: 'properties' at ", where(ptr), " must be an object");
            if (props.size() > size_t(kMaxProperties))
                fail("json_schema: more than ", kMaxProperties, " properties at ", where(ptr));
            for (const auto& [name, sub] : props.items()) {  // nlohmann keeps keys sorted
                if (needs_escape(name))
                    fail("json_schema: property name '", name, "' at ", where(ptr),
                         " needs escaping in JSON; not supported");
                n.prop_names.push_back(name);
                n.prop_nodes.push_back(compile(sub, ptr + "/properties/" + name, depth + 1));
            }
        }
        if (s.contains("required")) {
            const json& req = s["required"];
            if (!req.is_array())
                fail("json_schema: 'required' at ", where(ptr), " must be an array of names");
            for (const json& r : req) {
                const auto it = r.is_string() ? std::find(n.prop_names.begin(), n.prop_names.end(),
                                                          r.get<std::string>())
                                              : n.prop_names.end();
                if (it == n.prop_names.end())
                    fail("json_schema: required name ", r.dump(), " at ", where(ptr),
                         " is not one of its 'properties'");
                n.required |= uint64_t(1) << (it - n.prop_names.begin());
            }
        }
        // As llama.cpp's and vLLM's grammars: an object that names its properties is closed
        // unless additionalProperties says otherwise; one that names none takes any key.
        n.additional = s.contains("properties") ? -1 : kAnyNode;
        if (s.contains("additionalProperties")) {
            const json& a = s["additionalProperties"];
            if (a.is_boolean())
                n.additional = a.get<bool>() ? kAnyNode : -1;
            else
                n.additional = compile(a, ptr + "/additionalProperties", depth + 1);
        }
    }

    void array_rules(const json& s, const std::string& ptr, int depth, JsonNode& n) {
        n.items = kAnyNode;
        if (s.contains("items")) {
            if (s["items"].is_array())
                fail("json_schema: tuple 'items' (an array) at ", where(ptr), " is not supported");
            n.items = compile(s["items"], ptr + "/items", depth + 1);
        }
        if (s.contains("minItems")) n.min_items = count_field(s, "minItems", ptr);
        if (s.contains("maxItems")) n.max_items = count_field(s, "maxItems", ptr);
        if (n.max_items >= 0 && n.max_items < n.min_items)
            fail("json_schema: maxItems ", n.max_items, " < minItems ", n.min_items, " at ",
                 where(ptr));
    }

    JsonGrammarOptions opt_;
    clock_type::time_point t0_;
    JsonGrammar g_;
    std::vector<int> height_;             // per node: container levels below it in the schema
    const json* root_ = nullptr;          // the whole schema ($ref targets)
    std::vector<const json*> open_refs_;  // the references being compiled (recursion check)
    std::unordered_map<const json*, int32_t> shared_;  // compiled $ref targets
    size_t string_cells_ = 0;
};

void check_options(const JsonGrammarOptions& opt) {
    if (opt.max_ws < 0 || opt.max_ws > 64)
        fail("json grammar: max_ws ", opt.max_ws, " not in [0, 64]");
    if (opt.max_depth < 1 || opt.max_depth > 48)
        fail("json grammar: max_depth ", opt.max_depth, " not in [1, 48]");
    if (opt.max_nodes < 1) fail("json grammar: max_nodes ", opt.max_nodes, " must be positive");
    if (opt.max_compile_ms < 1)
        fail("json grammar: max_compile_ms ", opt.max_compile_ms, " must be positive");
}

}  // namespace

std::shared_ptr<const JsonGrammar> json_object_grammar(const JsonGrammarOptions& opt) {
    return json_schema_grammar(json{{"type", "object"}}, opt);
}

std::shared_ptr<const JsonGrammar> json_schema_grammar(const json& schema,
                                                       const JsonGrammarOptions& opt,
                                                       const std::string& ref_base) {
    check_options(opt);
    const json* base = &schema;
    if (!ref_base.empty()) {
        try {
            base = &schema.at(json::json_pointer(ref_base));
        } catch (const std::exception&) {
            fail("json grammar: the $ref base ", ref_base, " is not in the schema");
        }
    }
    Compiler c(opt, *base);
    const int32_t root = c.compile(schema, "", 0);
    auto g = std::make_shared<JsonGrammar>(c.take());
    g->root = root;
    return g;
}

std::shared_ptr<const JsonGrammar> json_schema_alternatives(const std::vector<FramedSchema>& list,
                                                            const JsonGrammarOptions& opt) {
    check_options(opt);
    if (list.empty()) fail("json grammar: no alternatives");
    Compiler c(opt);
    std::vector<JsonAlternative> alts;
    for (const FramedSchema& f : list) {
        c.set_root(*f.schema);
        alts.push_back({f.prefix, c.compile(*f.schema, "", 0), f.suffix});
    }
    std::sort(alts.begin(), alts.end(), [](const JsonAlternative& a, const JsonAlternative& b) {
        return a.prefix < b.prefix;
    });
    // Sorted, a prefix of another sorts right before one it is a prefix of.
    for (size_t i = 1; i < alts.size(); ++i)
        if (alts[i].prefix.starts_with(alts[i - 1].prefix))
            fail("json grammar: the alternative framed by '", alts[i - 1].prefix,
                 "' cannot be told apart from the one framed by '", alts[i].prefix, "'");
    auto g = std::make_shared<JsonGrammar>(c.take());
    g->alternatives = std::move(alts);
    g->root = g->alternatives[0].root;
    return g;
}

std::shared_ptr<const JsonGrammar> response_format_grammar(const json& rf,
                                                           const JsonGrammarOptions& opt) {
    if (!rf.is_object()) fail("response_format must be an object");
    if (!rf.contains("type") || !rf["type"].is_string())
        fail("response_format.type must be \"text\", \"json_object\" or \"json_schema\"");
    const std::string& t = rf["type"].get_ref<const std::string&>();
    if (t == "text") return nullptr;
    if (t == "json_object") return json_object_grammar(opt);
    if (t != "json_schema")
        fail("response_format.type '", t, "' must be \"text\", \"json_object\" or \"json_schema\"");
    if (!rf.contains("json_schema") || !rf["json_schema"].is_object())
        fail("response_format.json_schema must be an object with a 'schema'");
    const json& js = rf["json_schema"];
    if (!js.contains("schema")) fail("response_format.json_schema.schema is missing");
    return json_schema_grammar(js["schema"], opt);
}

}  // namespace specula
