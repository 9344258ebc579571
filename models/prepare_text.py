#!/usr/bin/env python3
"""Builds models/data/python-docs.txt, the English text the demo trains on.

The text is Python's own documentation, under the PSF License (see
models/data/LICENSE-python-docs.txt): the pydoc topic pages
(pydoc_data/topics.py) followed by the docstrings of the standard library's
modules, classes and functions, in sorted file order, ASCII only, until the
text holds at least --min-bytes bytes. Byte-level tokens are the bytes
themselves (strata-run --data-dtype uint8).

    python3 models/prepare_text.py [--out models/data/python-docs.txt]
"""
import argparse
import ast
import os
import sys
import sysconfig


def docstrings(path):
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc and len(doc) > 200:
                yield doc


def ascii_text(s):
    return s.encode("ascii", "ignore").decode("ascii")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(here, "data",
                                                      "python-docs.txt"))
    parser.add_argument("--min-bytes", type=int, default=1_200_000)
    args = parser.parse_args()
    stdlib = sysconfig.get_paths()["stdlib"]
    sys.path.insert(0, stdlib)
    from pydoc_data.topics import topics
    parts = [ascii_text(topics[k]) for k in sorted(topics)]
    size = sum(len(p) for p in parts)
    for name in sorted(os.listdir(stdlib)):
        if size >= args.min_bytes:
            break
        if name.endswith(".py"):
            for doc in docstrings(os.path.join(stdlib, name)):
                parts.append(ascii_text(doc))
                size += len(parts[-1])
    text = "\n\n".join(parts) + "\n"
    with open(args.out, "w", encoding="ascii") as f:
        f.write(text)
    print(f"{args.out}: {len(text)} bytes")


if __name__ == "__main__":
    main()
