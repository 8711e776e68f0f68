// The evaluator: renders a parsed Program against a context with @huggingface/jinja's semantics
// (scoping: a for loop opens one scope for all its iterations, a macro call opens one, `if` and
// `set` do not; undefined prints nothing, attribute access on undefined or none is undefined;
// break/continue drop the output of the iteration they leave). Filters, tests, methods and
// globals live in filters.cpp, tests.cpp, methods.cpp and globals.cpp, the binary
// operators in operators.cpp.
//
// Budgets keep hostile templates finite: evaluation steps (loop iterations, calls and
// expressions), nesting depth (macro recursion) and the size of any string or list built.
// Exceeding one throws specula::Error.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/value.h"

namespace specula::jinja {

struct Limits {
    size_t max_steps = 20'000'000;   // evaluated nodes, loop iterations and calls
    size_t max_calls = 100;          // nested calls (macro recursion)
    size_t max_depth = 1000;         // nested evaluation (expressions, blocks and calls)
    size_t max_output = 256u << 20;  // bytes of any string built, the output included
    size_t max_items = 4'000'000;    // elements of any list built (range, +, batch, ...)
};

struct Env {
    std::unordered_map<std::string, Value> vars;
    std::shared_ptr<Env> parent;
    bool call_block = false;  // the scope a {% call %} invokes its macro from
    explicit Env(std::shared_ptr<Env> p = nullptr) : parent(std::move(p)) {}
    const Value* lookup(const std::string& name) const;
};

class Interpreter {
  public:
    Interpreter(const Program& program, Limits limits);
    std::string render(const std::vector<std::pair<std::string, Value>>& context);

    // Used by filters, methods and globals.
    const Limits& limits() const { return limits_; }
    void tick(size_t n = 1);
    void check_size(size_t bytes) const;
    void check_items(size_t items) const;
    [[noreturn]] void error(const std::string& what) const;
    Value call(const Value& fn, std::vector<Value>& args, Kwargs& kwargs,
               const std::shared_ptr<Env>& env);
    Value apply_filter(const Value& operand, const std::string& name, std::vector<Value>& args,
                       Kwargs& kwargs, bool called, const std::shared_ptr<Env>& env);
    bool apply_test(const std::string& name, const Value& operand, const std::vector<Value>& args);
    bool has_test(const std::string& name) const;
    bool has_filter(const std::string& name) const;
    // Containers mutated in place (namespace attributes, list.append) are emptied when the
    // render ends, so a reference cycle built through them cannot leak.
    void track(const std::shared_ptr<Array>& a) {
        if (mutated_arrays_.empty() || mutated_arrays_.back().lock() != a)
            mutated_arrays_.push_back(a);
    }
    void track(const std::shared_ptr<Object>& o) {
        if (mutated_objects_.empty() || mutated_objects_.back().lock() != o)
            mutated_objects_.push_back(o);
    }

  private:
    const Program& program_;
    Limits limits_;
    size_t steps_ = 0;
    size_t depth_ = 0;
    size_t calls_ = 0;
    size_t at_ = 0;
    std::vector<std::weak_ptr<Array>> mutated_arrays_;
    std::vector<std::weak_ptr<Object>>
        mutated_objects_;  // offset of the node being evaluated, for error messages

    Value eval(const Ast& n, const std::shared_ptr<Env>& env);
    std::string render_block(const std::vector<AstPtr>& body, const std::shared_ptr<Env>& env);
    void render_node(const Ast& n, const std::shared_ptr<Env>& env, std::string& out);
    std::string render_for(const Ast& n, const std::shared_ptr<Env>& env);
    void execute_set(const Ast& n, const std::shared_ptr<Env>& env);
    void define_macro(const Ast& n, const std::shared_ptr<Env>& env);
    Value call_block(const Ast& n, const std::shared_ptr<Env>& env);
    Value binary(const Ast& n, const std::shared_ptr<Env>& env);
    Value member(const Ast& n, const std::shared_ptr<Env>& env);
    Value slice(const Value& object, const Ast& n, const std::shared_ptr<Env>& env);
    void arguments(const std::vector<AstPtr>& list, const std::shared_ptr<Env>& env,
                   std::vector<Value>& args, Kwargs& kwargs);
    void bind_parameters(const std::vector<AstPtr>& params, std::vector<Value>& args,
                         Kwargs& kwargs, const std::shared_ptr<Env>& scope,
                         const std::string& name);
    void append(std::string& out, const std::string& piece) const;
};

// Member functions and properties of a value (str.split, dict.items, list.append, ...);
// undefined when `name` is not one.
Value builtin_member(const Value& object, const std::string& name, Interpreter& in);

// The global names every render starts with (range, namespace, raise_exception, ...).
std::vector<std::pair<std::string, Value>> global_values();

// JavaScript's compare used by sort and dictsort: numbers (and booleans) by value, strings
// (case-insensitively unless asked), none equal to none; other pairs throw.
int compare_values(const Value& a, const Value& b, bool case_sensitive);

// Thrown by raise_exception(): the template's own message.
struct TemplateRaised {
    std::string message;
};

}  // namespace specula::jinja
