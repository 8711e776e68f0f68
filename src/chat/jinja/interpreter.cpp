#include "chat/jinja/interpreter.h"

#include <algorithm>
#include <cmath>

#include "chat/jinja/lexer.h"
#include "chat/jinja/unicode.h"
#include "common/error.h"

namespace specula::jinja {

namespace {

struct BreakSignal {};
struct ContinueSignal {};

thread_local Interpreter* t_render = nullptr;  // the render running on this thread

struct DepthGuard {
    size_t& depth;
    DepthGuard(size_t& d, size_t max, const Interpreter& in) : depth(d) {
        if (++depth > max) {
            --depth;
            in.error("nesting deeper than " + std::to_string(max) + " (runaway recursion?)");
        }
    }
    ~DepthGuard() { --depth; }
};

// Whether `name` is read anywhere under `n` (the macro special names kwargs, varargs, caller).
bool mentions(const Ast& n, const std::string& name) {
    if (n.kind == Node::Ident && n.str == name) return true;
    for (const AstPtr* p : {&n.a, &n.b, &n.c})
        if (*p && mentions(**p, name)) return true;
    for (const auto* v : {&n.list, &n.body, &n.alt})
        for (const AstPtr& x : *v)
            if (x && mentions(*x, name)) return true;
    for (const auto& [k, v] : n.pairs)
        if ((k && mentions(*k, name)) || (v && mentions(*v, name))) return true;
    return false;
}

bool mentions(const std::vector<AstPtr>& body, const std::string& name) {
    for (const AstPtr& x : body)
        if (mentions(*x, name)) return true;
    return false;
}

// The `loop` object of iteration i over `items`, as the reference makes one per iteration.
void set_loop_variable(Env& scope, const Array& items, size_t i) {
    Value loop = Value::object();
    const double len = double(items.size()), idx = double(i);
    auto& o = loop.obj->items;
    o.emplace_back("index", Value::integer(idx + 1));
    o.emplace_back("index0", Value::integer(idx));
    o.emplace_back("revindex", Value::integer(len - idx));
    o.emplace_back("revindex0", Value::integer(len - idx - 1));
    o.emplace_back("first", Value::from_bool(i == 0));
    o.emplace_back("last", Value::from_bool(i + 1 == items.size()));
    o.emplace_back("length", Value::integer(len));
    o.emplace_back("previtem", i > 0 ? items[i - 1] : Value::undefined());
    o.emplace_back("nextitem", i + 1 < items.size() ? items[i + 1] : Value::undefined());
    scope.vars["loop"] = std::move(loop);
}

}  // namespace

bool Interpreter::reads_loop(const Ast& for_node) {
    const auto it = uses_loop_.find(&for_node);
    if (it != uses_loop_.end()) return it->second;
    return uses_loop_[&for_node] = mentions(for_node, "loop");
}

const Value* Env::lookup(const std::string& name) const {
    for (const Env* e = this; e; e = e->parent.get()) {
        auto it = e->vars.find(name);
        if (it != e->vars.end()) return &it->second;
    }
    return nullptr;
}

void charge_allocation(size_t bytes) {
    if (t_render) t_render->charge(bytes);
}

void check_value_depth(uint32_t depth) {
    if (t_render && depth > uint32_t(t_render->limits().max_value_depth))
        t_render->error("value nested deeper than the limit of " +
                        std::to_string(t_render->limits().max_value_depth) + " levels");
}

Interpreter::Interpreter(const Program& program, Limits limits, std::function<bool()> cancelled)
    : program_(program), limits_(limits), cancelled_(std::move(cancelled)) {}

void Interpreter::error(const std::string& what) const {
    fail("chat template: ", describe_position(program_.source, at_), ": ", what);
}

void Interpreter::append(std::string& out, const std::string& piece) {
    check_size(out.size() + piece.size());
    work(piece.size());
    out += piece;
}

std::string Interpreter::render(const std::vector<std::pair<std::string, Value>>& context) {
    auto root = std::make_shared<Env>();
    for (auto& [k, v] : global_values()) root->vars[k] = v;
    for (const auto& [k, v] : context) {
        // As the reference, a context name may not redefine its globals; dict, ours alone, yields.
        if (root->vars.count(k) && k != "dict")
            fail("chat template: context variable '", k, "' clashes with a built-in name");
        root->vars[k] = v;
    }
    struct Cleanup {
        Interpreter& in;
        Interpreter* outer = t_render;
        ~Cleanup() {
            t_render = outer;
            for (auto& w : in.mutated_arrays_)
                if (auto a = w.lock()) a->clear();
            for (auto& w : in.mutated_objects_)
                if (auto o = w.lock()) o->items.clear();
            in.mutated_arrays_.clear();
            in.mutated_objects_.clear();
        }
    } cleanup{*this};
    t_render = this;
    try {
        return render_block(program_.body, root);
    } catch (const BreakSignal&) {
        error("break outside a loop");
    } catch (const ContinueSignal&) {
        error("continue outside a loop");
    }
}

std::string Interpreter::render_block(const std::vector<AstPtr>& body,
                                      const std::shared_ptr<Env>& env) {
    std::string out;
    for (const AstPtr& n : body) render_node(*n, env, out);
    return out;
}

void Interpreter::render_node(const Ast& n, const std::shared_ptr<Env>& env, std::string& out) {
    switch (n.kind) {
        case Node::Text:
            append(out, n.str);
            return;
        case Node::Comment:
            return;
        case Node::Set:
            at_ = n.offset;
            execute_set(n, env);
            return;
        case Node::If:
        case Node::For: {  // as eval does, but the block's text goes to `out`, never a value
            DepthGuard guard(depth_, limits_.max_depth, *this);
            tick();
            at_ = n.offset;
            if (n.kind == Node::For) return append(out, render_for(n, env));
            const bool t = eval(*n.a, env).truthy();
            return append(out, render_block(t ? n.body : n.alt, env));
        }
        default: {
            const Value v = eval(n, env);
            if (v.is_null() || v.is_undefined()) return;
            if (v.kind == Kind::Array ||
                v.is_container()) {  // as to_output, within the output limit
                JsonOptions o;
                o.max_len = limits_.max_output;
                o.max_depth = limits_.max_value_depth;
                std::string text;
                try {
                    text = to_json(v, o, false);
                } catch (const std::runtime_error& e) {
                    error(e.what());
                }
                append(out, text);
            } else {
                append(out, v.to_output());
            }
        }
    }
}

Value Interpreter::call(const Value& fn, std::vector<Value>& args, Kwargs& kwargs,
                        const std::shared_ptr<Env>& env) {
    if (fn.kind != Kind::Function)
        error(std::string("cannot call something that is not a function: got ") + fn.type_name());
    DepthGuard guard(calls_, limits_.max_calls, *this);
    tick();
    return (*fn.fn)(args, kwargs, *this, env);
}

void Interpreter::arguments(const std::vector<AstPtr>& list, const std::shared_ptr<Env>& env,
                            std::vector<Value>& args, Kwargs& kwargs) {
    for (const AstPtr& a : list) {
        if (a->kind == Node::Spread) {
            Value v = eval(*a->a, env);
            if (v.kind != Kind::Array)
                error(std::string("cannot unpack non-iterable type: ") + v.type_name());
            for (const Value& x : *v.arr) args.push_back(x);
        } else if (a->kind != Node::KwArg && a->kind != Node::KwSpread) {
            args.push_back(eval(*a, env));
        }
    }
    auto add = [&](const std::string& k, Value v) {
        for (const auto& kv : kwargs)
            if (kv.first == k) error("got multiple values for keyword argument '" + k + "'");
        kwargs.emplace_back(k, std::move(v));
    };
    for (const AstPtr& a : list) {
        if (a->kind == Node::KwArg) {
            add(a->str, eval(*a->a, env));
        } else if (a->kind == Node::KwSpread) {
            Value v = eval(*a->a, env);
            if (v.kind != Kind::Object)
                error(std::string("argument after ** must be a mapping, not ") + v.type_name());
            for (const auto& kv : v.obj->items) add(kv.first, kv.second);
        }
    }
}

Value Interpreter::eval(const Ast& n, const std::shared_ptr<Env>& env) {
    DepthGuard guard(depth_, limits_.max_depth, *this);
    tick();
    at_ = n.offset;
    switch (n.kind) {
        case Node::Text:
        case Node::String:
            return Value::string(n.str);
        case Node::Int:
            return Value::integer(n.num);
        case Node::Float:
            return Value::floating(n.num);
        case Node::Ident: {
            const Value* v = env->lookup(n.str);
            return v ? *v : Value::undefined();
        }
        case Node::ArrayLit:
        case Node::TupleLit: {
            Array a;
            for (const AstPtr& x : n.list) a.push_back(eval(*x, env));
            return Value::array(std::move(a), n.kind == Node::TupleLit);
        }
        case Node::ObjectLit: {
            Value o = Value::object();
            for (const auto& [k, v] : n.pairs) {
                Value key = eval(*k, env);
                if (key.kind != Kind::String)
                    error(std::string("object keys must be strings: got ") + key.type_name());
                Value item = eval(*v, env);
                o.depth = std::max(o.depth, item.depth + 1);
                o.obj->set(key.str(), std::move(item));
            }
            check_value_depth(o.depth);
            return o;
        }
        case Node::Member:
            return member(n, env);
        case Node::Call: {
            std::vector<Value> args;
            Kwargs kwargs;
            arguments(n.list, env, args, kwargs);
            Value fn = eval(*n.a, env);
            at_ = n.offset;
            return call(fn, args, kwargs, env);
        }
        case Node::Binary:
            return binary(n, env);
        case Node::Unary: {
            Value v = eval(*n.a, env);
            if (n.str == "not") return Value::from_bool(!v.truthy());
            if (!v.is_numeric_like())
                error("unknown operator '" + n.str + "' for " + v.type_name());
            const double r = (n.str == "-" ? -1 : 1) * v.numeric();
            return v.kind == Kind::Float ? Value::floating(r) : Value::integer(r);
        }
        case Node::Filter: {
            Value operand = eval(*n.a, env);
            std::vector<Value> args;
            Kwargs kwargs;
            arguments(n.list, env, args, kwargs);
            at_ = n.offset;
            return apply_filter(operand, n.str, args, kwargs, n.flag, env);
        }
        case Node::Test: {
            Value operand = eval(*n.a, env);
            std::vector<Value> args;
            Kwargs kwargs;
            arguments(n.list, env, args, kwargs);
            at_ = n.offset;
            const bool r = apply_test(n.str, operand, args);
            return Value::from_bool(n.flag ? !r : r);
        }
        case Node::Ternary:
            return eval(*n.a, env).truthy() ? eval(*n.b, env) : eval(*n.c, env);
        case Node::Select:
            return eval(*n.b, env).truthy() ? eval(*n.a, env) : Value::undefined();
        case Node::If: {
            const bool t = eval(*n.a, env).truthy();
            return Value::string(render_block(t ? n.body : n.alt, env));
        }
        case Node::For:
            return Value::string(render_for(n, env));
        case Node::Set:
            execute_set(n, env);
            return Value::null();
        case Node::Macro:
            define_macro(n, env);
            return Value::null();
        case Node::CallBlock:
            return call_block(n, env);
        case Node::FilterBlock: {
            Value body = Value::string(render_block(n.body, env));
            std::vector<Value> args;
            Kwargs kwargs;
            arguments(n.a->list, env, args, kwargs);
            at_ = n.offset;
            return apply_filter(body, n.a->str, args, kwargs, n.a->flag, env);
        }
        case Node::Comment:
            return Value::null();
        case Node::Break:
            throw BreakSignal{};
        case Node::Continue:
            throw ContinueSignal{};
        default:
            error("unexpected expression here");
    }
}

Value Interpreter::member(const Ast& n, const std::shared_ptr<Env>& env) {
    Value object = eval(*n.a, env);
    Value property;
    if (n.flag) {
        if (n.b->kind == Node::Slice) return slice(object, *n.b, env);
        property = eval(*n.b, env);
    } else if (n.b->kind == Node::Int) {
        property = Value::integer(n.b->num);
    } else {
        property = Value::string(n.b->str);
    }
    at_ = n.offset;
    if (object.is_container()) {
        if (property.kind != Kind::String)
            error(std::string("cannot access property with non-string: got ") +
                  property.type_name());
        if (const Value* v = object.obj->find(property.str())) return *v;
        return object.kind == Kind::Object ? builtin_member(object, property.str(), *this)
                                           : Value::undefined();
    }
    if (object.kind == Kind::Array || object.kind == Kind::String) {
        if (property.kind == Kind::Int) {
            double i = std::trunc(property.num);
            if (object.kind == Kind::Array) {
                const double len = double(object.arr->size());
                if (i < 0) i += len;
                return i >= 0 && i < len ? (*object.arr)[size_t(i)] : Value::undefined();
            }
            const Text& t = *object.text;
            const double len = double(t.code_point_count());
            if (i < 0) i += len;
            if (!(i >= 0 && i < len)) return Value::undefined();
            const auto [b, e] = t.code_point_span(size_t(i), size_t(i) + 1);
            return Value::string(t.bytes.substr(b, e - b));
        }
        if (property.kind == Kind::String) return builtin_member(object, property.str(), *this);
        error(std::string("cannot access property with non-string/non-number: got ") +
              property.type_name());
    }
    if (property.kind != Kind::String)
        error(std::string("cannot access property with non-string: got ") + property.type_name());
    return builtin_member(object, property.str(), *this);
}

void Interpreter::execute_set(const Ast& n, const std::shared_ptr<Env>& env) {
    Value rhs = n.b ? eval(*n.b, env) : Value::string(render_block(n.body, env));
    at_ = n.offset;
    const Ast& target = *n.a;
    if (target.kind == Node::Ident) {
        env->vars[target.str] = std::move(rhs);
    } else if (target.kind == Node::TupleLit) {
        if (rhs.kind != Kind::Array)
            error(std::string("cannot unpack non-iterable type in set: ") + rhs.type_name());
        if (rhs.arr->size() != target.list.size())
            error(std::string("too ") + (target.list.size() > rhs.arr->size() ? "few" : "many") +
                  " items to unpack in set");
        for (size_t i = 0; i < target.list.size(); ++i) {
            if (target.list[i]->kind != Node::Ident) error("cannot unpack to a non-name in set");
            env->vars[target.list[i]->str] = (*rhs.arr)[i];
        }
    } else if (target.kind == Node::Member) {
        Value object = eval(*target.a, env);
        if (object.kind != Kind::Namespace)
            error("cannot assign attribute on non-namespace object");
        if (target.flag || target.b->kind != Node::Ident)
            error("cannot assign to member with non-identifier property");
        track(object.obj);
        object.obj->set(target.b->str, std::move(rhs));
    } else {
        error("invalid target of set");
    }
}

std::string Interpreter::render_for(const Ast& n, const std::shared_ptr<Env>& env) {
    auto scope = std::make_shared<Env>(env);
    const Ast* test = nullptr;
    Value iterable;
    if (n.b->kind == Node::Select) {
        iterable = eval(*n.b->a, scope);
        test = n.b->b.get();
    } else {
        iterable = eval(*n.b, scope);
    }
    at_ = n.offset;
    Array candidates;
    if (iterable.kind == Kind::Array) {
        charge(iterable.arr->size() * sizeof(Value));
        candidates = *iterable.arr;  // a copy: the body may change the list
    } else if (iterable.kind == Kind::Object) {
        for (const auto& kv : iterable.obj->items) candidates.push_back(Value::string(kv.first));
    } else if (iterable.kind == Kind::String) {  // extension: the reference refuses strings
        const Text& t = *iterable.text;
        const size_t count = t.code_point_count();
        check_items(count);
        candidates.reserve(count);
        for (size_t i = 0; i < count; ++i) {
            const auto [b, e] = t.code_point_span(i, i + 1);
            candidates.push_back(Value::string(t.bytes.substr(b, e - b)));
        }
    } else {
        error(std::string("expected iterable or object type in for loop: got ") +
              iterable.type_name());
    }
    const Ast& var = *n.a;
    auto bind = [&](const Value& item, const std::shared_ptr<Env>& where) {
        if (var.kind == Node::Ident) {
            where->vars[var.str] = item;
            return;
        }
        for (size_t j = 0; j < var.list.size(); ++j) {
            if (var.list[j]->kind != Node::Ident) error("cannot unpack to a non-name in for");
            where->vars[var.list[j]->str] =
                j < item.arr->size() ? (*item.arr)[j] : Value::undefined();
        }
    };
    Array items;
    if (var.kind == Node::Ident && !test) {
        items = std::move(candidates);
    } else {
        for (const Value& c : candidates) {
            count_iteration();
            if (var.kind == Node::TupleLit) {
                if (c.kind != Kind::Array)
                    error(std::string("cannot unpack non-iterable type: ") + c.type_name());
                if (c.arr->size() != var.list.size())
                    error(std::string("too ") + (var.list.size() > c.arr->size() ? "few" : "many") +
                          " items to unpack");
            }
            if (test) {
                auto loop_scope = std::make_shared<Env>(scope);
                bind(c, loop_scope);
                if (!eval(*test, loop_scope).truthy()) continue;
            }
            items.push_back(c);
        }
    }
    std::string out;
    bool none = true;
    const bool uses_loop = reads_loop(n);
    for (size_t i = 0; i < items.size(); ++i) {
        count_iteration();
        if (uses_loop) set_loop_variable(*scope, items, i);
        bind(items[i], scope);
        try {
            append(out, render_block(n.body, scope));
        } catch (const ContinueSignal&) {
            continue;
        } catch (const BreakSignal&) {
            break;
        }
        none = false;
    }
    if (none) append(out, render_block(n.alt, scope));
    return out;
}

void Interpreter::bind_parameters(const std::vector<AstPtr>& params, std::vector<Value>& args,
                                  Kwargs& kwargs, const std::shared_ptr<Env>& scope,
                                  const std::string& name) {
    std::vector<const Ast*> pending;
    for (size_t i = 0; i < params.size(); ++i) {
        const Ast& p = *params[i];
        const std::string& pname = p.str;
        bool have = i < args.size();
        Value v = have ? args[i] : Value::undefined();
        if (!have) {
            for (auto it = kwargs.begin(); it != kwargs.end(); ++it)
                if (it->first == pname) {
                    v = it->second;
                    kwargs.erase(it);
                    have = true;
                    break;
                }
        }
        if (!have && p.kind == Node::KwArg) pending.push_back(&p);
        scope->vars[pname] = v;
    }
    Value kw = Value::object();
    for (auto& kv : kwargs) kw.obj->items.push_back(kv);
    scope->vars["kwargs"] = kw;
    Array rest;
    for (size_t i = params.size(); i < args.size(); ++i) rest.push_back(args[i]);
    scope->vars["varargs"] = Value::array(std::move(rest));
    (void)name;
    for (const Ast* p : pending) scope->vars[p->str] = eval(*p->a, scope);
}

void Interpreter::define_macro(const Ast& n, const std::shared_ptr<Env>& env) {
    const Ast* node = &n;
    std::weak_ptr<Env> def_env = env;  // weak: the macro is stored in that scope
    const bool uses_caller = mentions(n.body, "caller");
    const bool uses_kwargs = mentions(n.body, "kwargs");
    const bool uses_varargs = mentions(n.body, "varargs");
    env->vars[n.str] =
        Value::function([node, def_env, uses_caller, uses_kwargs, uses_varargs](
                            std::vector<Value>& args, Kwargs& kwargs, Interpreter& in,
                            const std::shared_ptr<Env>& call_env) -> Value {
            auto parent = def_env.lock();
            if (!parent) in.error("macro '" + node->str + "' called after its scope ended");
            auto scope = std::make_shared<Env>(parent);
            if (uses_caller) {
                const Value* c =
                    call_env && call_env->call_block ? call_env->lookup("caller") : nullptr;
                scope->vars["caller"] = c ? *c : Value::undefined();
            }
            size_t named = 0;
            for (const auto& kv : kwargs) {
                bool is_param = false;
                for (const AstPtr& p : node->list) is_param |= p->str == kv.first;
                named += !is_param;
            }
            if (named && !uses_kwargs)
                in.error("macro '" + node->str + "' takes no keyword argument '" +
                         kwargs.front().first + "'");
            if (args.size() > node->list.size() && !uses_varargs)
                in.error("macro '" + node->str + "' takes not more than " +
                         std::to_string(node->list.size()) + " argument(s)");
            in.bind_parameters(node->list, args, kwargs, scope, node->str);
            return Value::string(in.render_block(node->body, scope));
        });
}

Value Interpreter::call_block(const Ast& n, const std::shared_ptr<Env>& env) {
    const Ast* node = &n;
    Value caller =
        Value::function([node, env](std::vector<Value>& args, Kwargs& kwargs, Interpreter& in,
                                    const std::shared_ptr<Env>&) -> Value {
            auto scope = std::make_shared<Env>(env);
            in.bind_parameters(node->list, args, kwargs, scope, "caller");
            return Value::string(in.render_block(node->body, scope));
        });
    std::vector<Value> args;
    Kwargs kwargs;
    arguments(n.a->list, env, args, kwargs);
    Value fn = eval(*n.a->a, env);
    at_ = n.offset;
    auto site = std::make_shared<Env>(env);
    site->call_block = true;
    site->vars["caller"] = caller;
    return call(fn, args, kwargs, site);
}

}  // namespace specula::jinja
