#include "chat/jinja/text_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "chat/jinja/unicode.h"

namespace specula::jinja {

size_t find_text(std::string_view hay, std::string_view needle, size_t pos) {
    if (pos > hay.size()) return std::string::npos;
    if (needle.empty()) return pos;
    const void* hit = memmem(hay.data() + pos, hay.size() - pos, needle.data(), needle.size());
    return hit ? size_t(static_cast<const char*>(hit) - hay.data()) : std::string::npos;
}

size_t rfind_text(std::string_view hay, std::string_view needle) {
    if (needle.size() > hay.size()) return std::string::npos;
    if (needle.empty()) return hay.size();
    // The first match in the reversed text is the last one in the text.
    const std::string rh(hay.rbegin(), hay.rend()), rn(needle.rbegin(), needle.rend());
    const size_t r = find_text(rh, rn);
    return r == std::string::npos ? r : hay.size() - r - needle.size();
}

size_t count_words(const std::string& s) {
    size_t n = 0;
    for (size_t i = 0; i < s.size();) {
        while (i < s.size() && whitespace_len(s, i)) i += whitespace_len(s, i);
        if (i >= s.size()) break;
        ++n;
        while (i < s.size() && !whitespace_len(s, i)) i += utf8_len(s, i);
    }
    return n;
}

std::string title_case(const std::string& s) {
    std::string r = s;
    for (size_t i = 0; i < r.size(); ++i)
        if (is_word_char(r[i]) && (i == 0 || !is_word_char(r[i - 1])) && r[i] >= 'a' && r[i] <= 'z')
            r[i] = char(r[i] - 32);
    return r;
}

std::string capitalize(const std::string& s) {
    if (s.empty()) return s;
    const size_t n = utf8_len(s, 0);
    return to_upper(s.substr(0, n)) + s.substr(n);
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to,
                        double count) {
    if (count == 0) return s;
    double left = count < 0 ? 1e300 : count;
    std::string out;
    if (from.empty()) {
        for (size_t i = 0;;) {
            if (left > 0) {
                out += to;
                --left;
            }
            if (i >= s.size()) break;
            const size_t n = utf8_len(s, i);
            out.append(s, i, n);
            i += n;
        }
        return out;
    }
    size_t pos = 0;
    while (left > 0) {
        const size_t hit = find_text(s, from, pos);
        if (hit == std::string::npos) break;
        out.append(s, pos, hit - pos);
        out += to;
        pos = hit + from.size();
        --left;
    }
    out.append(s, pos, std::string::npos);
    return out;
}

std::vector<std::string> split_whitespace(const std::string& s, double maxsplit) {
    const std::string text = trim_start(s);
    std::vector<std::string> out;
    size_t i = 0;
    while (i < text.size()) {
        while (size_t n = whitespace_len(text, i)) i += n;
        if (i >= text.size()) break;
        size_t e = i;
        while (e < text.size() && !whitespace_len(text, e)) e += utf8_len(text, e);
        if (maxsplit >= 0 && double(out.size()) >= maxsplit) {
            out.push_back(text.substr(i));
            break;
        }
        out.push_back(text.substr(i, e - i));
        i = e;
    }
    return out;
}

std::vector<std::string> split_on(const std::string& s, const std::string& sep, double maxsplit) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (true) {
        const size_t hit = find_text(s, sep, pos);
        if (hit == std::string::npos) break;
        out.push_back(s.substr(pos, hit - pos));
        pos = hit + sep.size();
    }
    out.push_back(s.substr(pos));
    if (maxsplit >= 0 && double(out.size()) > maxsplit) {
        const size_t keep = size_t(maxsplit);
        std::string rest;
        for (size_t i = keep; i < out.size(); ++i) rest += (i > keep ? sep : "") + out[i];
        out.resize(keep);
        out.push_back(rest);
    }
    return out;
}

std::optional<double> parse_int(const std::string& s) {
    const std::string t = trim_start(s);
    size_t i = 0;
    bool neg = false;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) neg = t[i++] == '-';
    double v = 0;
    const size_t start = i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') v = v * 10 + (t[i++] - '0');
    if (i == start) return std::nullopt;
    return neg ? -v : v;
}

std::optional<double> parse_float(const std::string& s) {
    const std::string t = trim_start(s);
    size_t i = 0;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
    if (t.compare(i, 8, "Infinity") == 0) return t[0] == '-' ? -INFINITY : INFINITY;
    size_t digits = 0;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i, ++digits;
    if (i < t.size() && t[i] == '.') {
        ++i;
        while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i, ++digits;
    }
    if (!digits) return std::nullopt;
    if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
        size_t j = i + 1;
        if (j < t.size() && (t[j] == '+' || t[j] == '-')) ++j;
        if (j < t.size() && t[j] >= '0' && t[j] <= '9') {
            while (j < t.size() && t[j] >= '0' && t[j] <= '9') ++j;
            i = j;
        }
    }
    return std::strtod(t.substr(0, i).c_str(), nullptr);
}

std::string html_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&#34;";
                break;
            case '\'':
                out += "&#39;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

}  // namespace specula::jinja
