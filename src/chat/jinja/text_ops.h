// String operations shared by filters and methods, each with the reference's JavaScript
// behaviour: title case (\b\w upper-cased, the rest kept), capitalize (first character upper,
// the rest kept), replace (count, empty pattern between code points), split (None splits runs
// of whitespace), parseInt/parseFloat, and HTML escaping. Substring searches take time linear
// in the text and the pattern (glibc's two-way memmem), never their product: a template cannot
// make `pattern in text` quadratic.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specula::jinja {

// The first occurrence of `needle` at or after `pos`, std::string::npos when none.
size_t find_text(std::string_view hay, std::string_view needle, size_t pos = 0);
// The last occurrence of `needle`, std::string::npos when none.
size_t rfind_text(std::string_view hay, std::string_view needle);
// Number of whitespace-separated words (split_whitespace(s, -1).size() without the list).
size_t count_words(const std::string& s);

std::string title_case(const std::string& s);
std::string capitalize(const std::string& s);
// count < 0: all occurrences.
std::string replace_all(const std::string& s, const std::string& from, const std::string& to,
                        double count);
std::vector<std::string> split_whitespace(const std::string& s, double maxsplit);
std::vector<std::string> split_on(const std::string& s, const std::string& sep, double maxsplit);
std::optional<double> parse_int(const std::string& s);
std::optional<double> parse_float(const std::string& s);
std::string html_escape(const std::string& s);

}  // namespace specula::jinja
