// The prompts file of ../shared/reference/prompts ([{"name": "...", "text": "..."}, ...], JSON
// escapes) for the reference dumpers of this folder (ref_dump.cpp, mtp_ref_dump.cpp), which are
// built outside the Specula build and have no JSON library.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace ref_prompts {

// A tiny reader for the prompts file: [{"name": "...", "text": "..."}, ...] with JSON escapes.
inline std::string read_jstring(const std::string& s, size_t& i) {
    std::string o;
    for (++i; s[i] != '"'; ++i) {
        if (s[i] != '\\') {
            o += s[i];
            continue;
        }
        const char c = s[++i];
        if (c == 'n')
            o += '\n';
        else if (c == 't')
            o += '\t';
        else if (c == 'r')
            o += '\r';
        else if (c == 'u') {
            unsigned cp = std::stoul(s.substr(i + 1, 4), nullptr, 16);
            i += 4;
            if (cp >= 0xD800 && cp < 0xDC00) {  // surrogate pair
                const unsigned lo = std::stoul(s.substr(i + 3, 4), nullptr, 16);
                i += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (cp < 0x80)
                o += char(cp);
            else if (cp < 0x800)
                o += char(0xC0 | cp >> 6), o += char(0x80 | (cp & 63));
            else if (cp < 0x10000)
                o += char(0xE0 | cp >> 12), o += char(0x80 | ((cp >> 6) & 63)),
                    o += char(0x80 | (cp & 63));
            else
                o += char(0xF0 | cp >> 18), o += char(0x80 | ((cp >> 12) & 63)),
                    o += char(0x80 | ((cp >> 6) & 63)), o += char(0x80 | (cp & 63));
        } else {
            o += c;
        }
    }
    ++i;
    return o;
}

inline std::vector<std::pair<std::string, std::string>> read_prompts(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string s = ss.str();
    std::vector<std::pair<std::string, std::string>> out;
    std::string name;
    for (size_t i = 0; i < s.size();) {
        if (s[i] != '"') {
            ++i;
            continue;
        }
        const std::string key = read_jstring(s, i);
        while (s[i] != '"') ++i;
        const std::string val = read_jstring(s, i);
        if (key == "name") name = val;
        if (key == "text") out.emplace_back(name, val);
    }
    return out;
}

}  // namespace ref_prompts
