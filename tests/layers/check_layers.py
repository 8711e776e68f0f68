#!/usr/bin/env python3
"""The pipeline order of src/'s folders (README's map): a file may include headers of its own
folder and of folders before it, never of a folder after it. Exits 1 naming every include that
runs back up (file, line, folder), and names a folder of src/ missing from the order."""
import os
import re
import sys

ORDER = ["common", "gguf", "kernels", "tokenizer", "model", "vulkan", "sampling", "chat",
         "speculative", "runtime", "server", "bench", "cli"]

INCLUDE = re.compile(r'\s*#\s*include\s+"([^"/]+)/')


def main(src):
    folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    problems = [f"src/{d}/ is not in the layer order (tests/layers/check_layers.py)"
                for d in folders if d not in ORDER]
    rank = {d: i for i, d in enumerate(ORDER)}
    n_files = 0
    for top in folders:
        for root, _, files in os.walk(os.path.join(src, top)):
            for name in files:
                if not name.endswith((".h", ".cpp", ".inc")):
                    continue
                n_files += 1
                path = os.path.join(root, name)
                with open(path, errors="replace") as f:
                    for no, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or m.group(1) not in rank or top not in rank:
                            continue
                        if rank[m.group(1)] > rank[top]:
                            rel = os.path.relpath(path, os.path.dirname(src))
                            problems.append(f"{rel}:{no}: {top}/ includes {m.group(1)}/, "
                                            "a folder after it in the pipeline")
    for p in problems:
        print(p)
    if n_files == 0:
        print(f"no source files under {src}")
        return 1
    print(f"{n_files} files checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "src"))
