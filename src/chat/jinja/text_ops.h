// String operations shared by filters and methods, each with the reference's JavaScript
// behaviour: title case (\b\w upper-cased, the rest kept), capitalize (first character upper,
// the rest kept), replace (count, empty pattern between code points), split (None splits runs
// of whitespace), parseInt/parseFloat, and HTML escaping.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace specula::jinja {

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
