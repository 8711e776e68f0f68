// The evaluator: renders a parsed Program against a context with @huggingface/jinja's semantics
// (scoping: a for loop opens one scope for all its iterations, a macro call opens one, `if` and
// `set` do not; undefined prints nothing, attribute access on undefined or none is undefined;
// break/continue drop the output of the iteration they leave). Filters, tests, methods and
// globals live in filters.cpp, tests.cpp, methods.cpp and globals.cpp, the binary
// operators in operators.cpp, the budgets' counting in budget.cpp.
//
// Budgets keep hostile templates finite, each per render (Limits): evaluation steps (nodes,
// calls, loop iterations and work proportional to the bytes and items an operation walks), loop
// iterations, nesting depth (expressions, blocks, macro recursion), the size of any one string
// or list, the bytes of all strings, lists and object entries created together, and the nesting
// of values that tojson and printing walk. Exceeding one throws specula::Error naming the limit
// ("chat template: line 1, column 4: more than 1000000 loop iterations (the limit per render)").
// A render also stops, with an Error, once its `cancelled` callback (polled every few thousand
// steps) says so: the server's client went away.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/value.h"

namespace specula::jinja {

// The defaults are far above what real chat templates use on real conversations (the largest
// of tests/chat's renders: see docs/chat-templates.md#limits) and keep a hostile one to a
// second or two of CPU and a few hundred MB.
struct Limits {
    size_t max_steps = 20'000'000;      // evaluated nodes, loop iterations, calls and work
    size_t max_iterations = 1'000'000;  // loop iterations, all loops of the render together
    size_t max_calls = 100;             // nested calls (macro recursion)
    size_t max_depth = 1000;            // nested evaluation (expressions, blocks and calls)
    size_t max_output = 32u << 20;      // bytes of any one string built, the output included
    size_t max_items = 1'000'000;       // elements of any one list (range, +, append, |list, ...)
    size_t max_bytes = 256u << 20;      // bytes of the strings, lists and entries created
    int max_value_depth = kMaxValueDepth;  // list/object nesting that tojson and printing walk
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
    // `cancelled` (optional): polled every kPollSteps steps; true stops the render with an Error.
    Interpreter(const Program& program, Limits limits, std::function<bool()> cancelled = {});
    std::string render(const std::vector<std::pair<std::string, Value>>& context);
    static constexpr size_t kPollSteps = 4096;

    // Used by filters, methods and globals.
    const Limits& limits() const { return limits_; }
    void tick(size_t n = 1);
    // Work over `bytes` bytes (a copy, a comparison, a walk): one step per 256 bytes.
    void work(size_t bytes) { tick(1 + bytes / 256); }
    // A substring search through `bytes` bytes: one step per 16 (memmem's worst inputs run at a
    // fraction of memcpy's speed).
    void search_work(size_t bytes) { tick(1 + bytes / 16); }
    void charge(size_t bytes);  // allocated bytes (value.h's charge_allocation lands here)
    void check_size(size_t bytes) const;
    void check_items(size_t items) const;
    void count_iteration();  // one loop iteration, against max_iterations
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
    std::function<bool()> cancelled_;
    size_t next_poll_ = kPollSteps;
    size_t bytes_ = 0;
    size_t iterations_ = 0;
    size_t steps_ = 0;
    size_t depth_ = 0;
    size_t calls_ = 0;
    size_t at_ = 0;  // offset of the node being evaluated, for error messages
    std::vector<std::weak_ptr<Array>> mutated_arrays_;
    std::vector<std::weak_ptr<Object>> mutated_objects_;
    std::unordered_map<const Ast*, bool> uses_loop_;  // a for loop's body reads `loop`

    bool reads_loop(const Ast& for_node);  // cached per node

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
    void append(std::string& out, const std::string& piece);
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
