// The filters' shared pieces (chat/jinja/filters.cpp holds the table, filters_text.cpp the
// string and object filters): one filter application and its arguments.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chat/jinja/interpreter.h"

namespace specula::jinja::filters {

// One filter application: the operand, the filter's name as written and its arguments.
struct FilterCall {
    Interpreter& in;
    const Value& x;
    const std::string& name;
    std::vector<Value>& args;
    Kwargs& kwargs;
    bool called;  // written with parentheses
    const std::shared_ptr<Env>& env;

    [[noreturn]] void cannot() const {
        in.error("cannot apply filter \"" + name + "\" to type: " + x.type_name());
    }
};

using FilterFn = Value (*)(const FilterCall&);

// Argument i, else the keyword argument `name`; null when neither is given.
inline const Value* arg(const std::vector<Value>& args, const Kwargs& kwargs, size_t i,
                        const char* name) {
    if (i < args.size()) return &args[i];
    for (const auto& kv : kwargs)
        if (kv.first == name) return &kv.second;
    return nullptr;
}

// On strings (filters_text.cpp).
Value s_upper(const FilterCall& c);
Value s_lower(const FilterCall& c);
Value s_title(const FilterCall& c);
Value s_capitalize(const FilterCall& c);
Value s_trim(const FilterCall& c);
Value s_escape(const FilterCall& c);
Value s_wordcount(const FilterCall& c);
Value s_code_points(const FilterCall& c);  // list, first, last, reverse
Value s_indent(const FilterCall& c);
Value s_replace(const FilterCall& c);
Value s_center(const FilterCall& c);
Value s_format(const FilterCall& c);
// On objects.
Value o_method(const FilterCall& c);  // items, keys, values, dictsort
Value o_list(const FilterCall& c);

}  // namespace specula::jinja::filters
