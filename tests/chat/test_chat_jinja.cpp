// The Jinja engine (src/chat/jinja) through its public API (chat/jinja_template.h). The
// ChatJinjaReference cases were rendered with @huggingface/jinja 0.5.13 and their output pasted
// here as the expected string; the rest checks errors, budgets and the API itself.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "chat/jinja_template.h"
#include "common/error.h"

namespace {

std::string render(const std::string& tmpl, const std::string& context_json) {
    return specula::render_chat_template(tmpl, nlohmann::ordered_json::parse(context_json));
}

// The message of the Error rendering throws ("" when it renders).
std::string error_of(const std::string& tmpl, const std::string& context_json = "{}") {
    try {
        render(tmpl, context_json);
    } catch (const specula::Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(ChatJinjaReference, IfElifElse) {
    EXPECT_EQ(
        render("{% if x > 1 %}big{% elif x == 1 %}one{% else %}small{% endif %}", R"J({"x": 1})J"),
        "one");
}

TEST(ChatJinjaReference, LoopIndexLength) {
    EXPECT_EQ(render("{% for m in ms %}{{ loop.index }}/{{ loop.length }}{{ '|' if not loop.last "
                     "}}{% endfor %}",
                     R"J({"ms": ["a", "b", "c"]})J"),
              "1/3|2/3|3/3");
}

TEST(ChatJinjaReference, LoopPrevNextItem) {
    EXPECT_EQ(render("{% for x in xs %}{{ loop.previtem | default('^') }}{{ x }}{{ loop.nextitem | "
                     "default('$') }} {% endfor %}",
                     R"J({"xs": [1, 2, 3]})J"),
              "^12 123 23$ ");
}

TEST(ChatJinjaReference, ForElse) {
    EXPECT_EQ(render("{% for x in [] %}x{% else %}none{% endfor %}", R"J({})J"), "none");
}

TEST(ChatJinjaReference, ForInlineIf) {
    EXPECT_EQ(render("{% for x in range(6) if x is even %}{{ x }}{% endfor %}", R"J({})J"), "024");
}

TEST(ChatJinjaReference, NamespaceInLoop) {
    EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i "
                     "%}{% endfor %}{{ ns.n }}",
                     R"J({})J"),
              "6");
}

TEST(ChatJinjaReference, BlockSet) {
    EXPECT_EQ(render("{% set s %}a{{ 1 + 1 }}b{% endset %}{{ s | length }}{{ s }}", R"J({})J"),
              "3a2b");
}

TEST(ChatJinjaReference, MacroDefaultsAndKeywords) {
    EXPECT_EQ(render("{% macro m(a, b='B') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ "
                     "m(a=3, b=4) }}",
                     R"J({})J"),
              "1B1234");
}

TEST(ChatJinjaReference, CallBlock) {
    EXPECT_EQ(render("{% macro w() %}[{{ caller() }}]{% endmacro %}{% call w() %}in{% endcall %}",
                     R"J({})J"),
              "[in]");
}

TEST(ChatJinjaReference, FilterBlock) {
    EXPECT_EQ(render("{% filter upper %}abc{{ 'd' }}{% endfilter %}", R"J({})J"), "ABCD");
}

TEST(ChatJinjaReference, WhitespaceControlAndBlockTrimming) {
    EXPECT_EQ(render("a {%- if true %} b {% endif -%} c\n  {% if true %}\nd\n  {% endif %}\ne\n",
                     R"J({})J"),
              "a b c\nd\ne");
}

TEST(ChatJinjaReference, CommentsAndGeneration) {
    EXPECT_EQ(
        render("{{- ' x ' -}}|{# c #}|{%- generation -%} y {%- endgeneration -%}|", R"J({})J"),
        " x ||y|");
}

TEST(ChatJinjaReference, StringEscapes) {
    EXPECT_EQ(render("{{ 'a\\tb\\n\\'c\\'' }}{{ \"\\u00e9\\x41\" }}", R"J({})J"), "a\tb\n'c'éA");
}

TEST(ChatJinjaReference, IntegerAndFloatArithmetic) {
    EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 8 }} "
                     "{{ 2 ** -1 }} {{ 1.5 + 1 }} {{ 4 / 2 }}",
                     R"J({})J"),
              "3 -4 1 -1 3.5 256 0.5 2.5 2.0");
}

TEST(ChatJinjaReference, NumberPrinting) {
    EXPECT_EQ(render("{{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1 / 3 }} {{ -0.0 }} {{ 100 * 1.0 }} {{ "
                     "10000000000.0 * 100000000000.0 }} {{ 1 / 10000000 }}",
                     R"J({})J"),
              "1.0 0.30000000000000004 0.3333333333333333 -0.0 100.0 1e+21 1e-7");
}

TEST(ChatJinjaReference, ConcatWithUndefined) {
    EXPECT_EQ(render("{{ 'a' ~ 1 ~ u ~ true }}", R"J({})J"), "a1true");
}

TEST(ChatJinjaReference, ConcatMixedTypes) {
    EXPECT_EQ(render("{{ 'a' ~ 1 ~ true ~ 2.0 }} {{ 'x' + 2 }}", R"J({})J"), "a1true2 x2");
}

TEST(ChatJinjaReference, MembershipAndEquality) {
    EXPECT_EQ(render("{{ 'b' in 'abc' }} {{ 2 not in [1, 3] }} {{ 'k' in {'k': 0} }} {{ 1 == 1.0 "
                     "}} {{ 1 == '1' }} {{ not none }}",
                     R"J({})J"),
              "true true true true true true");
}

TEST(ChatJinjaReference, ConditionalExpressions) {
    EXPECT_EQ(render("{{ 'y' if c else 'n' }} {{ 'a' if false else 'b' if true else 'c' }} [{{ 'z' "
                     "if false }}]",
                     R"J({"c": 0})J"),
              "n b []");
}

TEST(ChatJinjaReference, Slicing) {
    EXPECT_EQ(
        render("{{ l[1:] }} {{ l[::-1] }} {{ l[-2:] }} {{ l[:1] }} {{ s[1:4] }} {{ s[::-2] }}",
               R"J({"l": [1, 2, 3], "s": "hello"})J"),
        "[2, 3] [3, 2, 1] [2, 3] [1] ell olh");
}

TEST(ChatJinjaReference, AttributeAndSubscript) {
    EXPECT_EQ(render("{{ d.a }} {{ d['b'] }} {{ d.c is defined }} {{ d.c.e is undefined }} {{ l[0] "
                     "}} {{ l[-1] }}",
                     R"J({"d": {"a": 1, "b": 2}, "l": [5, 6]})J"),
              "1 2 false true 5 6");
}

TEST(ChatJinjaReference, Tests) {
    EXPECT_EQ(
        render("{{ x is defined }} {{ x is undefined }} {{ none is none }} {{ 'a' is string }} {{ "
               "1 is number }} {{ 1 is integer }} {{ {} is mapping }} {{ [] is iterable }} {{ 'x' "
               "is iterable }} {{ true is boolean }} {{ 3 is odd }} {{ 4 is even }} {{ true is "
               "true }} {{ 1 is false }} {{ 'ab' is lower }} {{ 'AB' is upper }}",
               R"J({})J"),
        "false true true true true true true true true true true true true false true true");
}

TEST(ChatJinjaReference, ToJson) {
    EXPECT_EQ(render("{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ d | tojson(ensure_ascii=true) "
                     "}}|{{ d | tojson(separators=(',', ':')) }}",
                     R"J({"d": {"b": [1, 2.5, null, true], "a": "é\"\n"}})J"),
              "{\"b\": [1, 2.5, null, true], \"a\": \"é\\\"\\n\"}|{\n  \"b\": [\n    1,\n    "
              "2.5,\n    null,\n    true\n  ],\n  \"a\": \"é\\\"\\n\"\n}|{\"b\": [1, 2.5, null, "
              "true], \"a\": \"\\u00e9\\\"\\n\"}|{\"b\":[1,2.5,null,true],\"a\":\"é\\\"\\n\"}");
}

TEST(ChatJinjaReference, StringFilters) {
    EXPECT_EQ(render("{{ '  x  ' | trim }}|{{ 'ab' | upper }}|{{ 'AB' | lower }}|{{ 'hello "
                     "big-world' | title }}|{{ 'hELLO' | capitalize }}|{{ 'abc' | length }}|{{ l | "
                     "count if false else l | length }}",
                     R"J({"l": [1, 2]})J"),
              "x|AB|ab|Hello Big-World|HELLO|3|2");
}

TEST(ChatJinjaReference, ListFilters) {
    EXPECT_EQ(render("{{ l | first }} {{ l | last }} {{ l | join(',') }} {{ l | reverse | list }} "
                     "{{ l | sort }} {{ l | sort(reverse=true) }} {{ [2, 1, 2] | unique | list }}",
                     R"J({"l": [3, 1, 2]})J"),
              "3 2 3,1,2 [2, 1, 3] [1, 2, 3] [3, 2, 1] [2, 1]");
}

TEST(ChatJinjaReference, DefaultFilter) {
    EXPECT_EQ(
        render("{{ u | default('d') }} {{ '' | default('e', true) }} {{ 'v' | default('x') }}",
               R"J({})J"),
        "d e v");
}

TEST(ChatJinjaReference, ReplaceAndIndent) {
    EXPECT_EQ(render("{{ 'a-b' | replace('-', '+') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ 'x\ny' "
                     "| indent(2) }} {{ 'x\ny' | indent(2, true) }}",
                     R"J({})J"),
              "a+b bba x\n  y   x\n  y");
}

TEST(ChatJinjaReference, SelectRejectMap) {
    EXPECT_EQ(
        render(
            "{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') "
            "}} {{ ms | rejectattr('role', 'equalto', 'user') | list | length }}",
            R"J({"ms": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}, {"role": "user", "content": "c"}]})J"),
        "a,c 1");
}

TEST(ChatJinjaReference, NumberFilters) {
    EXPECT_EQ(render("{{ -3 | abs }} {{ '42' | int }} {{ 'x' | int }} {{ 3.7 | int }} {{ '1.5' | "
                     "float }} {{ 2 | float }} {{ 2 | string }}",
                     R"J({})J"),
              "3 42 0 3 1.5 2.0 2");
}

TEST(ChatJinjaReference, DictFiltersAndMethods) {
    EXPECT_EQ(render("{{ d | items | list }} {{ d.keys() | list }} {{ d.values() | list }} {{ "
                     "d.get('a') }} {{ d.get('z', 0) }} {{ d | dictsort }}",
                     R"J({"d": {"b": 2, "a": 1}})J"),
              "[[\"b\", 2], [\"a\", 1]] [\"b\", \"a\"] [2, 1] 1 0 [[\"a\", 1], [\"b\", 2]]");
}

TEST(ChatJinjaReference, StringMethods) {
    EXPECT_EQ(render("{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ s.split() }}|{{ "
                     "'a,b,c'.split(',', 1) }}|{{ s.startswith(' ') }}|{{ s.endswith('x') }}|{{ "
                     "s.upper() }}|{{ s.replace('o', '0') }}",
                     R"J({"s": " foo bar "})J"),
              "foo bar|foo bar | foo bar|[\"foo\", \"bar\"]|[\"a\", \"b,c\"]|true|false| FOO BAR | "
              "f00 bar ");
}

TEST(ChatJinjaReference, Range) {
    EXPECT_EQ(render("{{ range(3) }} {{ range(1, 7, 2) }} {{ range(3, 0, -1) }}", R"J({})J"),
              "[0, 1, 2] [1, 3, 5] [3, 2, 1]");
}

TEST(ChatJinjaReference, UndefinedPrintsNothing) {
    EXPECT_EQ(render("[{{ u }}][{{ none }}][{{ u.a }}]", R"J({})J"), "[][][]");
}

TEST(ChatJinjaReference, ContainersPrintAsJson) {
    EXPECT_EQ(render("{{ [1, 'a', [true, none]] }} {{ {'a': {'b': 1}} }}", R"J({})J"),
              "[1, \"a\", [true, null]] {\"a\": {\"b\": 1}}");
}

TEST(ChatJinjaReference, ObjectKeyOrderAsJavaScript) {
    EXPECT_EQ(render("{{ m | tojson }}", R"J({"m": {"z": 1, "10": 2, "a": 3}})J"),
              "{\"10\": 2, \"z\": 1, \"a\": 3}");
}

TEST(ChatJinjaReference, IntegralJsonNumbersAreIntegers) {
    EXPECT_EQ(render("{{ a }} {{ a is integer }} {{ b }}", R"J({"a": 2.0, "b": 2.5})J"),
              "2 true 2.5");
}

TEST(ChatJinja, RawBlockIsText) {
    EXPECT_EQ(render("a{% raw %}{{ x }}{% if %}{% endraw %}b", "{}"), "a{{ x }}{% if %}b");
}

TEST(ChatJinja, TestsWithArguments) {
    EXPECT_EQ(
        render("{{ 6 is divisibleby(3) }} {{ 2 is eq 2 }} {{ 2 is ne(3) }} {{ 1 is float }}", "{}"),
        "true true true false");
}

TEST(ChatJinja, Jinja2FiltersTheReferenceLacks) {
    EXPECT_EQ(
        render(
            "{{ [1, 2, 3, 4, 5] | batch(2) | list }} {{ [1, 2, 3] | sum }} {{ [3, 1, 2] | min }} "
            "{{ [3, 1, 2] | max }} {{ 'a b  c' | wordcount }} [{{ 'ab' | center(6) }}] "
            "{{ '%s=%d' | format('x', 3) }} {{ '<a&b>' | escape }} {{ [1, 0, 2] | select | list }} "
            "{{ ['a', 'b'] | map('upper') | join }} {{ 2.567 | round(1) }} {{ x | d('dflt') }}",
            "{}"),
        "[[1, 2], [3, 4], [5]] 6 1 3 3 [  ab  ] x=3 &lt;a&amp;b&gt; [1, 2] AB 2.6 dflt");
}

TEST(ChatJinja, PythonStringAndListMethods) {
    EXPECT_EQ(
        render(
            "{{ 'hello'.find('l') }} {{ 'hello'.count('l') }} {{ 'a\\nb'.splitlines() }} "
            "{{ '{} and {name}'.format(1, name='x') }} {% set l = [1] %}{{ l.append(2) }}{{ l }} "
            "{{ ', '.join(['a', 'b']) }} {{ dict(a=1) }}",
            "{}"),
        "2 2 [\"a\", \"b\"] 1 and x [1, 2] a, b {\"a\": 1}");
}

TEST(ChatJinja, EnableThinkingFromKwargs) {
    const std::string t =
        "{%- if enable_thinking is defined and enable_thinking is false "
        "%}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}go";
    EXPECT_EQ(render(t, R"({"enable_thinking": false})"), "<think>\n\n</think>\n\ngo");
    EXPECT_EQ(render(t, R"({"enable_thinking": true})"), "go");
    EXPECT_EQ(render(t, "{}"), "go");
}

TEST(ChatJinja, SyntaxErrorNamesLineAndColumn) {
    const std::string e = error_of("line one\n{{ a + }}");
    EXPECT_NE(e.find("line 2, column 8"), std::string::npos) << e;
    EXPECT_NE(error_of("{% if x %}no end").find("endif"), std::string::npos);
    EXPECT_NE(error_of("{% frobnicate %}").find("unknown statement 'frobnicate'"),
              std::string::npos);
    EXPECT_NE(error_of("{{ 'open ").find("unterminated string"), std::string::npos);
}

TEST(ChatJinja, UnknownFilterAndTestAreErrors) {
    EXPECT_NE(error_of("{{ 'a' | shout }}").find("unknown filter: shout"), std::string::npos);
    EXPECT_NE(error_of("{{ 'a' is shouting }}").find("unknown test: shouting"), std::string::npos);
    EXPECT_NE(error_of("{{ nothing() }}").find("not a function"), std::string::npos);
}

TEST(ChatJinja, RaiseExceptionCarriesTheMessage) {
    const std::string e = error_of(
        "{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('Tools are not "
        "supported: ' ~ m.role) "
        "}}{% endif %}{% endfor %}",
        R"({"messages": [{"role": "tool"}]})");
    EXPECT_EQ(e, "chat template raised: Tools are not supported: tool");
}

TEST(ChatJinja, BudgetsStopRunawayTemplates) {
    specula::jinja::Limits small;
    small.max_steps = 100000;
    small.max_output = 1 << 20;
    auto fails = [&](const std::string& t) {
        try {
            specula::ChatTemplate(t, small).render(nlohmann::json::object());
        } catch (const specula::Error&) {
            return true;
        }
        return false;
    };
    EXPECT_TRUE(
        fails("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"));
    EXPECT_TRUE(fails("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"));
    EXPECT_TRUE(fails(
        "{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s "
        "%}{% endfor %}"));
    EXPECT_TRUE(fails("{{ range(100000000000) | length }}"));
    EXPECT_TRUE(fails("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"));
    // lists sharing their halves: 2^40 leaves, a few bytes of state
    const std::string doubling =
        "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = [ns.l, ns.l] %}{% "
        "endfor %}";
    EXPECT_TRUE(fails(doubling + "{{ ns.l | tojson }}"));
    EXPECT_TRUE(fails(doubling + "{{ ns.l }}"));
    EXPECT_TRUE(
        fails("{% set a = [] %}{% set b = [a] %}{{ a.append(b) }}{{ a | tojson }}"));  // a cycle
    EXPECT_FALSE(fails("{% for i in range(100) %}{{ i }}{% endfor %}"));
}

TEST(ChatJinja, ParseOnceRenderMany) {
    const specula::ChatTemplate t(
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}");
    EXPECT_EQ(t.render(nlohmann::json{{"messages", {{{"role", "user"}, {"content", "a"}}}}}),
              "<user>a");
    EXPECT_EQ(t.render(nlohmann::json{{"messages", nlohmann::json::array()},
                                      {"add_generation_prompt", true}}),
              "<assistant>");
    EXPECT_EQ(t.source().substr(0, 6), "{% for");
}

TEST(ChatJinja, OrderedJsonKeepsToolSchemaOrder) {
    const std::string ctx =
        R"({"tool": {"type": "function", "name": "f", "args": {"b": 1, "a": 2}}})";
    EXPECT_EQ(
        specula::render_chat_template("{{ tool | tojson }}", nlohmann::ordered_json::parse(ctx)),
        R"({"type": "function", "name": "f", "args": {"b": 1, "a": 2}})");
    // A plain nlohmann::json has already sorted its keys.
    EXPECT_EQ(specula::render_chat_template("{{ tool | tojson }}", nlohmann::json::parse(ctx)),
              R"({"args": {"a": 2, "b": 1}, "name": "f", "type": "function"})");
}

TEST(ChatJinja, ContextMustBeAnObjectAndNotShadowBuiltins) {
    EXPECT_THROW(specula::render_chat_template("x", nlohmann::json::array()), specula::Error);
    EXPECT_THROW(specula::render_chat_template("x", nlohmann::json{{"range", 1}}), specula::Error);
}
