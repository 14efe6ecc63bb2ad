#!/usr/bin/env python3
"""Gives every top-level suite of Tests/PTTIntegrationTests the `.integration` trait (and `import TestSupport`).

Idempotent: run it after adding a suite there (CI's lint fails on a suite without it: `--check`)."""
import os, re, sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "Tests", "PTTIntegrationTests")
check = "--check" in sys.argv
missing = []


def close_paren(text, start):
    depth, i, in_string = 0, start, False
    while i < len(text):
        c = text[i]
        if in_string:
            if c == "\\":
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError("unbalanced @Suite(")


for folder, _, files in os.walk(ROOT):
    for name in sorted(files):
        if not name.endswith(".swift"):
            continue
        path = os.path.join(folder, name)
        text = original = open(path).read()
        for match in reversed(list(re.finditer(r"^@Suite\b", text, re.M))):
            end = match.end()
            if text.startswith("(", end):
                close = close_paren(text, end)
                if ".integration" not in text[end:close]:
                    text = text[:close] + ", .integration" + text[close:]
            else:
                text = text[:end] + "(.integration)" + text[end:]
        if text != original and "import TestSupport" not in text:
            imports = list(re.finditer(r"^import \w+\n", text, re.M))
            at = next((m.start() for m in imports if m.group(0) > "import TestSupport\n"), None)
            if at is None:
                at = imports[-1].end() if imports else 0
            text = text[:at] + "import TestSupport\n" + text[at:]
        if text != original:
            missing.append(os.path.relpath(path, os.path.join(ROOT, "..", "..")))
            if not check:
                open(path, "w").write(text)

if check and missing:
    print("integration suites without `.integration` (run python3 .ci/mark-integration.py):")
    print("\n".join("  " + m for m in missing))
    sys.exit(1)
