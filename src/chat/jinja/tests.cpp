// Tests (`value is name`, `value is not name(arg)`): those of @huggingface/jinja with its
// semantics (boolean, callable, odd, even, true, false, none, string, number, integer, iterable
// (a list or a string), mapping, sequence, lower, upper, defined, undefined, equalto/eq), plus
// Jinja2's float, divisibleby, ne, lt/le/gt/ge and their symbols, in, sameas and escaped.
// One table, kTests: a test's name -> its function.
#include <cmath>

#include "chat/jinja/interpreter.h"
#include "chat/jinja/text_ops.h"
#include "chat/jinja/unicode.h"

namespace specula::jinja {

namespace {

// One test: the operand, the test's name as written and its argument (undefined when none).
struct TestCall {
    Interpreter& in;
    const std::string& name;
    const Value& x;
    const Value& other;
};

bool t_boolean(const TestCall& c) {
    return c.x.kind == Kind::Bool;
}
bool t_callable(const TestCall& c) {
    return c.x.kind == Kind::Function;
}
// odd and even.
bool t_odd(const TestCall& c) {
    if (c.x.kind != Kind::Int) c.in.error("cannot " + c.name + " on " + c.x.type_name());
    const bool odd = std::fmod(c.x.num, 2) != 0;
    return c.name == "odd" ? odd : !odd;
}
bool t_false(const TestCall& c) {
    return c.x.kind == Kind::Bool && !c.x.boolean;
}
bool t_true(const TestCall& c) {
    return c.x.kind == Kind::Bool && c.x.boolean;
}
bool t_none(const TestCall& c) {
    return c.x.is_null();
}
bool t_string(const TestCall& c) {
    return c.x.kind == Kind::String;
}
bool t_number(const TestCall& c) {
    return c.x.is_number();
}
bool t_integer(const TestCall& c) {
    return c.x.kind == Kind::Int;
}
bool t_float(const TestCall& c) {
    return c.x.kind == Kind::Float;
}
bool t_iterable(const TestCall& c) {  // as the reference: a tuple is not
    return (c.x.kind == Kind::Array && !c.x.tuple) || c.x.kind == Kind::String;
}
bool t_mapping(const TestCall& c) {
    return c.x.kind == Kind::Object;
}
bool t_sequence(const TestCall& c) {
    return c.x.kind == Kind::Array || c.x.kind == Kind::Object || c.x.kind == Kind::String;
}
bool t_lower(const TestCall& c) {
    return c.x.kind == Kind::String && c.x.str() == to_lower(c.x.str());
}
bool t_upper(const TestCall& c) {
    return c.x.kind == Kind::String && c.x.str() == to_upper(c.x.str());
}
bool t_defined(const TestCall& c) {
    return !c.x.is_undefined();
}
bool t_undefined(const TestCall& c) {
    return c.x.is_undefined();
}
bool t_escaped(const TestCall&) {
    return false;
}
bool t_equal(const TestCall& c) {
    return strict_equal(c.x, c.other);
}
bool t_not_equal(const TestCall& c) {
    return !strict_equal(c.x, c.other);
}
bool t_divisibleby(const TestCall& c) {
    if (!c.x.is_number() || !c.other.is_number() || c.other.num == 0)
        c.in.error("divisibleby needs two numbers, the divisor not 0");
    return std::fmod(c.x.num, c.other.num) == 0;
}
bool t_in(const TestCall& c) {
    const Value &x = c.x, &other = c.other;
    if (other.kind == Kind::Array) {
        c.in.tick(other.arr->size());
        for (const Value& v : *other.arr)
            if (strict_equal(v, x)) return true;
        return false;
    }
    if (other.kind == Kind::String && x.kind == Kind::String) {
        c.in.search_work(other.str().size());
        return find_text(other.str(), x.str()) != std::string::npos;
    }
    if (other.kind == Kind::Object && x.kind == Kind::String)
        return other.obj->find(x.str()) != nullptr;
    c.in.error(std::string("cannot test 'in' on ") + other.type_name());
}

// The operand against the argument, as sort compares (an Error for pairs it cannot order).
int compare(const TestCall& c) {
    try {
        return compare_values(c.x, c.other, true);
    } catch (const std::runtime_error& e) {
        c.in.error(e.what());
    }
}
bool t_lt(const TestCall& c) {
    return compare(c) < 0;
}
bool t_le(const TestCall& c) {
    return compare(c) <= 0;
}
bool t_gt(const TestCall& c) {
    return compare(c) > 0;
}
bool t_ge(const TestCall& c) {
    return compare(c) >= 0;
}

struct TestRow {
    const char* name;
    bool (*fn)(const TestCall&);
};

constexpr TestRow kTests[] = {
    {"boolean", t_boolean},
    {"callable", t_callable},
    {"odd", t_odd},
    {"even", t_odd},
    {"false", t_false},
    {"true", t_true},
    {"none", t_none},
    {"string", t_string},
    {"number", t_number},
    {"integer", t_integer},
    {"iterable", t_iterable},
    {"mapping", t_mapping},
    {"sequence", t_sequence},
    {"lower", t_lower},
    {"upper", t_upper},
    {"defined", t_defined},
    {"undefined", t_undefined},
    {"equalto", t_equal},
    {"eq", t_equal},
    {"==", t_equal},
    {"float", t_float},
    {"divisibleby", t_divisibleby},
    {"ne", t_not_equal},
    {"!=", t_not_equal},
    {"lt", t_lt},
    {"<", t_lt},
    {"lessthan", t_lt},
    {"le", t_le},
    {"<=", t_le},
    {"gt", t_gt},
    {">", t_gt},
    {"greaterthan", t_gt},
    {"ge", t_ge},
    {">=", t_ge},
    {"in", t_in},
    {"sameas", t_equal},
    {"escaped", t_escaped},
};

const TestRow* find_test(const std::string& name) {
    for (const TestRow& row : kTests)
        if (name == row.name) return &row;
    return nullptr;
}

}  // namespace

bool Interpreter::has_test(const std::string& name) const {
    return find_test(name) != nullptr;
}

bool Interpreter::apply_test(const std::string& name, const Value& x,
                             const std::vector<Value>& args) {
    const TestRow* row = find_test(name);
    if (!row) error("unknown test: " + name);
    const Value other = args.empty() ? Value::undefined() : args[0];
    if (x.text || other.text) work(x.str().size() + other.str().size());
    return row->fn(TestCall{*this, name, x, other});
}

}  // namespace specula::jinja
