// The string and object filters of the table in filters.cpp (see there).
#include <algorithm>
#include <cmath>

#include "chat/jinja/filter_call.h"
#include "chat/jinja/text_ops.h"
#include "chat/jinja/unicode.h"

namespace specula::jinja::filters {

// Filters on strings.

Value s_upper(const FilterCall& c) {
    return Value::string(to_upper(c.x.str()));
}
Value s_lower(const FilterCall& c) {
    return Value::string(to_lower(c.x.str()));
}
Value s_title(const FilterCall& c) {
    return Value::string(title_case(c.x.str()));
}
Value s_capitalize(const FilterCall& c) {
    return Value::string(capitalize(c.x.str()));
}
Value s_trim(const FilterCall& c) {
    return Value::string(trim(c.x.str()));
}
Value s_escape(const FilterCall& c) {
    size_t grown = 0;  // each of & < > " ' becomes 4 or 5 bytes
    for (char ch : c.x.str())
        grown += ch == '&' || ch == '<' || ch == '>' || ch == '"' || ch == '\'';
    c.in.check_size(c.x.str().size() + 4 * grown);
    return Value::string(html_escape(c.x.str()));
}
Value s_wordcount(const FilterCall& c) {
    return Value::integer(double(count_words(c.x.str())));
}

// list, first, last and reverse: by code point (the list counted before it is made).
Value s_code_points(const FilterCall& c) {
    const Text& t = *c.x.text;
    const size_t n = t.code_point_count();
    auto at = [&](size_t i) {
        const auto [b, e] = t.code_point_span(i, i + 1);
        return std::string_view(t.bytes).substr(b, e - b);
    };
    if (c.name == "first") return n ? Value::string(std::string(at(0))) : Value::undefined();
    if (c.name == "last") return n ? Value::string(std::string(at(n - 1))) : Value::undefined();
    if (c.name == "reverse") {
        std::string r;
        r.reserve(t.bytes.size());
        for (size_t i = n; i-- > 0;) r += at(i);
        return Value::string(std::move(r));
    }
    c.in.check_items(n);
    Array a;
    a.reserve(n);
    for (size_t i = 0; i < n; ++i) a.push_back(Value::string(std::string(at(i))));
    return Value::array(std::move(a));
}

Value s_indent(const FilterCall& c) {
    const Value* w = arg(c.args, c.kwargs, 0, "width");
    if (w && w->kind != Kind::Int && w->kind != Kind::String)
        c.in.error("width must be an integer or a string");
    const Value* first = arg(c.args, c.kwargs, 1, "first");
    const Value* blank = arg(c.args, c.kwargs, 2, "blank");
    const std::string pad = !w ? "    "
                            : w->kind == Kind::String
                                ? w->str()
                                : std::string(size_t(std::clamp(w->num, 0.0, 4096.0)), ' ');
    const std::string_view s = c.x.str();
    std::string out;
    for (size_t i = 0, start = 0; start <= s.size(); ++i) {  // line by line, none kept
        const size_t end = std::min(s.find('\n', start), s.size());
        const std::string_view line = s.substr(start, end - start);
        if (i) out += '\n';
        const bool keep = (!(first && first->truthy()) && i == 0) ||
                          (!(blank && blank->truthy()) && line.empty());
        if (!keep) out += pad;
        out += line;
        c.in.check_size(out.size());
        start = end + 1;
    }
    return Value::string(std::move(out));
}

Value s_replace(const FilterCall& c) {
    const std::string& s = c.x.str();
    const std::vector<Value>& args = c.args;
    if (args.size() < 2) c.in.error("replace() requires at least two arguments");
    if (args[0].kind != Kind::String || args[1].kind != Kind::String)
        c.in.error("replace() arguments must be strings");
    const Value* count = arg(args, c.kwargs, 2, "count");
    if (count && count->kind != Kind::Int && !count->is_null())
        c.in.error("replace() count argument must be a number or null");
    const double n = count && count->kind == Kind::Int ? count->num : -1;
    c.in.search_work(s.size());
    const size_t growth =
        args[0].str().empty() ? (s.size() + 1) * args[1].str().size()
        : args[1].str().size() > args[0].str().size()
            ? (s.size() / args[0].str().size() + 1) * (args[1].str().size() - args[0].str().size())
            : 0;
    c.in.check_size(s.size() + growth);
    return Value::string(replace_all(s, args[0].str(), args[1].str(), n < 0 ? -1 : n));
}

Value s_center(const FilterCall& c) {
    const std::string& s = c.x.str();
    const Value* w = arg(c.args, c.kwargs, 0, "width");
    const double width = w && w->is_number() ? std::min(w->num, 1e6) : 80;
    const double len = double(utf16_length(s));
    if (len >= width) return c.x;
    const size_t total = size_t(width - len), left = total / 2;
    return Value::string(std::string(left, ' ') + s + std::string(total - left, ' '));
}

// Python's % formatting: %s, %d, %i, %f and %%.
Value s_format(const FilterCall& c) {
    const std::string& s = c.x.str();
    std::string out;
    size_t next = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '%' || i + 1 >= s.size()) {
            out += s[i];
            continue;
        }
        const char f = s[++i];
        if (f == '%') {
            out += '%';
        } else if (f == 's' || f == 'd' || f == 'i' || f == 'f') {
            if (next >= c.args.size()) c.in.error("not enough arguments for format string");
            const Value& v = c.args[next++];
            out += f == 's'   ? v.to_output()
                   : f == 'f' ? float_string(v.numeric())
                              : js_number(std::trunc(v.numeric()));
            c.in.check_size(out.size());
        } else {
            out += '%';
            out += f;
        }
    }
    return Value::string(out);
}

// Filters on objects.

// items, keys, values and dictsort: the object's method of that name, called.
Value o_method(const FilterCall& c) {
    Value fn = builtin_member(c.x, c.name, c.in);
    return c.in.call(fn, c.args, c.kwargs, c.env);
}

Value o_list(const FilterCall& c) {
    Array keys;
    keys.reserve(c.x.obj->items.size());
    for (const auto& kv : c.x.obj->items) keys.push_back(Value::string(kv.first));
    return Value::array(std::move(keys));
}

}  // namespace specula::jinja::filters
