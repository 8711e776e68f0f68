#!/usr/bin/env python3
"""The pipeline order of src/'s folders (README's map): a file may include headers of its own
folder and of folders before it, never of a folder after it. Inside a folder split into
sub-folders (SUB_ORDER) the same holds between them: a file of a sub-folder (or of the folder's
top, ".") includes headers of its own sub-folder and of the ones before it. Exits 1 naming every
include that runs back up (file, line, folders), and names a folder or sub-folder missing from
the order."""
import os
import re
import sys

ORDER = ["common", "gguf", "kernels", "quantize", "tokenizer", "model", "vulkan", "sampling",
         "chat", "speculative", "runtime", "server", "bench", "cli"]

# Each split folder's sub-folders in order; "." is the folder's own top-level files. Folders not
# listed here keep their sub-folders as parts of one whole (kernels' per-ISA folders, chat/jinja).
SUB_ORDER = {
    "model": ["load", "state", "blocks", ".", "arch"],
    "speculative": ["draft_length", "drafters", "."],
    "server": ["protocol", "serving", "api", "."],
}

INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')


def sub_of(rel_parts):
    """The sub-folder of a path below a top folder (its parts after the top), "." at the top."""
    return rel_parts[0] if len(rel_parts) > 1 else "."


def main(src):
    folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    problems = [f"src/{d}/ is not in the layer order (tests/layers/check_layers.py)"
                for d in folders if d not in ORDER]
    for top, subs in SUB_ORDER.items():
        path = os.path.join(src, top)
        if not os.path.isdir(path):
            problems.append(f"src/{top}/ is in SUB_ORDER but does not exist")
            continue
        for d in sorted(os.listdir(path)):
            if os.path.isdir(os.path.join(path, d)) and d not in subs:
                problems.append(f"src/{top}/{d}/ is not in src/{top}/'s sub-folder order "
                                "(tests/layers/check_layers.py)")
    rank = {d: i for i, d in enumerate(ORDER)}
    n_files = 0
    for top in folders:
        for root, _, files in os.walk(os.path.join(src, top)):
            for name in files:
                if not name.endswith((".h", ".cpp", ".inc")):
                    continue
                n_files += 1
                path = os.path.join(root, name)
                rel = os.path.relpath(path, os.path.dirname(src))
                here = sub_of(os.path.relpath(path, os.path.join(src, top)).split(os.sep))
                with open(path, errors="replace") as f:
                    for no, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or "/" not in m.group(1):
                            continue
                        parts = m.group(1).split("/")
                        if parts[0] not in rank or top not in rank:
                            continue
                        if rank[parts[0]] > rank[top]:
                            problems.append(f"{rel}:{no}: {top}/ includes {parts[0]}/, "
                                            "a folder after it in the pipeline")
                        elif parts[0] == top and top in SUB_ORDER:
                            subs = SUB_ORDER[top]
                            there = sub_of(parts[1:])
                            if here in subs and there in subs and \
                                    subs.index(there) > subs.index(here):
                                problems.append(f"{rel}:{no}: {top}/{here} includes "
                                                f"{top}/{there}, a sub-folder after it")
    for p in problems:
        print(p)
    if n_files == 0:
        print(f"no source files under {src}")
        return 1
    print(f"{n_files} files checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "src"))
