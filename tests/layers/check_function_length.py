#!/usr/bin/env python3
"""No function in src/ longer than LIMIT lines (from the line of its opening brace to the line of
its closing one): a long function is a table or a few functions waiting to be written. Reads C++
as text: comments, string and character literals (raw strings too) are blanked first, then each
outermost brace whose header ends like a function's (a parameter list, then qualifiers or a
trailing return type) is measured. Exits 1 naming every function over the limit (file, line,
length)."""
import os
import re
import sys

LIMIT = 120

CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|do|else|return)\b")
# What may stand between a parameter list and a body: qualifiers, a trailing return type, a
# constructor's member initialisers (ending in a parenthesis or a brace-initialised member).
FUNCTION_TAIL = re.compile(
    r"\)\s*(const|noexcept|override|final|mutable|volatile|&|&&|\s)*"
    r"(->\s*[\w:<>,\s\*&]+)?\s*$")


def blank(text):
    """The text with comments and literals replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def long_functions(path):
    text = blank(open(path, errors="replace").read())
    found = []
    stack = []  # (is_function, line of the brace)
    header_start = 0
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == "{":
            header = text[header_start:i]
            inside_function = any(f for f, _ in stack)
            is_function = (not inside_function and FUNCTION_TAIL.search(header) is not None and
                           not CONTROL.match(header.strip().split("\n")[-1]) and
                           "=" not in header.split("(")[0])
            stack.append((is_function, line))
            header_start = i + 1
        elif c == "}":
            if stack:
                is_function, start = stack.pop()
                if is_function and line - start + 1 > LIMIT:
                    found.append((start, line - start + 1))
            header_start = i + 1
        elif c == ";":
            header_start = i + 1
    return found


def main(src):
    problems = []
    n_files = 0
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".h", ".cpp", ".inc")):
                continue
            n_files += 1
            path = os.path.join(root, name)
            rel = os.path.relpath(path, os.path.dirname(os.path.abspath(src)))
            for start, length in long_functions(path):
                problems.append(f"{rel}:{start}: a function of {length} lines (at most {LIMIT})")
    for p in problems:
        print(p)
    if n_files == 0:
        print(f"no source files under {src}")
        return 1
    print(f"{n_files} files checked, {len(problems)} function(s) over {LIMIT} lines")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "src"))
