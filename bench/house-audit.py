#!/usr/bin/env python3
"""The layout checks "Done means" asks for, read from the source alone.

    bench/house-audit.py lengths [--over N] [--top K]
        every function's length in lines, longest first, outside tests
        (files under tests/, files named tests.rs, and `#[cfg(test)]`
        items are skipped); exit 1 when one is over N (default 300).
    bench/house-audit.py loops
        the import loops between the top-level modules of each crate
        (`crate::a` named in a.rs's tree and `crate::b` in b's, and so on
        round a cycle); exit 1 when there is one.
    bench/house-audit.py words
        every tracked file that cites a reference by an internal number
        ("seed" and three digits) instead of by its authors
        (docs/references.md); exit 1 when one does.
    bench/house-audit.py verbs [--max-fn N]
        for each verb file in crates/cli/src/cmd/, its lines outside
        tests, its longest function, and any other verb it imports;
        exit 1 when a verb imports another, or, with --max-fn, when a
        verb's longest function is over N lines (each named).

A brace counter, not a parser: it skips comments, strings (raw ones
included) and character literals, which is all Rust's braces need. Run
from the repository's root; needs only python3.
"""
import os
import re
import signal
import sys

# A closed pipe (`| head`) ends the listing quietly, as the verbs do.
signal.signal(signal.SIGPIPE, signal.SIG_DFL)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATES = os.path.join(ROOT, "crates")


def blank_code(text):
    """The text with comments, strings and char literals replaced by
    spaces (newlines kept), so braces and words left are code."""
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
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif (c == "r" or c == "b") and re.match(r'(br|r)#*"', text[i:i + 70]) \
                and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'(br|r)(#*)"', text[i:])
            end = '"' + m.group(2)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            # A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            if m:
                out.append(" " * m.end())
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def rust_files(under, skip_tests=True):
    for dirpath, dirnames, files in os.walk(under):
        dirnames[:] = sorted(d for d in dirnames if d != "target" and not (skip_tests and d == "tests"))
        for f in sorted(files):
            if f.endswith(".rs") and not (skip_tests and f == "tests.rs"):
                yield os.path.join(dirpath, f)


def block_end(code, open_at):
    """Index just past the brace that closes the one at `open_at`."""
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(code)


def without_cfg_test(code):
    """The code with every `#[cfg(test)]` item blanked."""
    for m in list(re.finditer(r"#\[cfg\(test\)\]", code)):
        brace = code.find("{", m.end())
        semi = code.find(";", m.end())
        if brace < 0 or (0 <= semi < brace):
            end = semi + 1
        else:
            end = block_end(code, brace)
        code = code[:m.start()] + re.sub(r"[^\n]", " ", code[m.start():end]) + code[end:]
    return code


FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")


def functions(path):
    """(name, first line, lines) of each function with a body in `path`;
    a method is named `Type::name` after its nearest `impl`."""
    code = without_cfg_test(blank_code(open(path, encoding="utf-8").read()))
    impls = []
    for m in re.finditer(r"\bimpl\b[^{;]*\{", code):
        head = code[m.start():m.end() - 1]
        name = re.findall(r"(?:for\s+)?([A-Za-z_][A-Za-z0-9_]*)(?:<[^{]*>)?\s*(?:where[^{]*)?$", head.strip())
        ty = re.sub(r"<.*", "", head.split(" for ")[-1].replace("impl", "", 1)).strip().split()
        impls.append((m.start(), block_end(code, m.end() - 1), ty[-1] if ty else (name[0] if name else "?")))
    out = []
    for m in FN.finditer(code):
        # The body opens at the first `{` not inside the signature's
        # parentheses or generics; a `;` first means no body.
        j, paren = m.end(), 0
        while j < len(code):
            ch = code[j]
            if ch in "(<[":
                paren += 1
            elif ch in ")>]":
                paren -= 1 if not (ch == ">" and code[j - 1] == "-") else 0
            elif ch == ";" and paren <= 0:
                j = -1
                break
            elif ch == "{" and paren <= 0:
                break
            j += 1
        if j < 0 or j >= len(code):
            continue
        end = block_end(code, j)
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, end - 1) + 1
        owner = [t for (s, e, t) in impls if s < m.start() < e]
        name = (owner[-1] + "::" if owner else "") + m.group(1)
        out.append((name, first, last - first + 1))
    return out


def rel(p):
    return os.path.relpath(p, ROOT)


class Usage(Exception):
    """Bad input: one sentence, exit status 2."""


def int_option(args, flag, default):
    """The whole number after `flag` in `args`, or `default` without it."""
    if flag not in args:
        return default
    i = args.index(flag)
    if i + 1 >= len(args):
        raise Usage(f"{flag} needs a number of lines")
    try:
        n = int(args[i + 1])
    except ValueError:
        raise Usage(f"{flag} '{args[i + 1]}' is not a whole number") from None
    if n < 0:
        raise Usage(f"{flag} {n} is negative; give a number of lines")
    return n


def lengths(args):
    over = int_option(args, "--over", 300)
    top = int_option(args, "--top", 15)
    rows = []
    for crate in sorted(os.listdir(CRATES)):
        src = os.path.join(CRATES, crate, "src")
        for f in rust_files(src):
            for name, line, n in functions(f):
                rows.append((n, f"{rel(f)}:{line}", name))
    rows.sort(key=lambda r: (-r[0], r[1]))
    print(f"{len(rows)} functions outside tests; the {top} longest (lines, where, name):")
    for n, where, name in rows[:top]:
        print(f"{n:6}  {where}  {name}")
    bad = [r for r in rows if r[0] > over]
    print(f"over {over} lines: {len(bad)}")
    return 1 if bad else 0


def module_of(src, path):
    """The top-level module a file under `src` belongs to (`lib` for
    lib.rs and main.rs)."""
    parts = os.path.relpath(path, src).split(os.sep)
    head = parts[0][:-3] if parts[0].endswith(".rs") else parts[0]
    return "lib" if head in ("lib", "main") else head


def module_edges(src):
    edges = {}
    for f in rust_files(src):
        me = module_of(src, f)
        code = without_cfg_test(blank_code(open(f, encoding="utf-8").read()))
        names = set(re.findall(r"\bcrate::([a-z_][a-z0-9_]*)", code))
        # `use crate::{a, b::c}` names several at once.
        for group in re.findall(r"\bcrate::\{([^}]*)\}", code):
            names |= set(re.findall(r"(?:^|,)\s*([a-z_][a-z0-9_]*)", group))
        if me != "lib":
            # A child module reaches its parent's siblings as super::x.
            depth = len(os.path.relpath(f, src).split(os.sep)) - 1
            if depth == 0:
                names |= set(re.findall(r"\bsuper::([a-z_][a-z0-9_]*)", code))
        mods = {os.path.splitext(p)[0] for p in os.listdir(src)} - {"lib", "main"}
        for n in names:
            if n in mods and n != me:
                edges.setdefault(me, set()).add(n)
    return edges


def cycles(edges):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def loops(_args):
    found = 0
    for crate in sorted(os.listdir(CRATES)):
        src = os.path.join(CRATES, crate, "src")
        if not os.path.isdir(src):
            continue
        edges = module_edges(src)
        cyc = cycles(edges)
        n = sum(len(v) for v in edges.values())
        if cyc:
            found += len(cyc)
            for comp in cyc:
                ties = [f"{a}->{b}" for a in comp for b in sorted(edges.get(a, ())) if b in comp]
                print(f"{crate}: loop among {', '.join(comp)} ({'; '.join(ties)})")
        else:
            print(f"{crate}: {len(edges)} modules importing, {n} edges, no loop")
    print(f"import loops: {found}")
    return 1 if found else 0


def verbs(args):
    max_fn = int_option(args, "--max-fn", None)
    cmd = os.path.join(CRATES, "cli", "src", "cmd")
    names = sorted(f[:-3] for f in os.listdir(cmd) if f.endswith(".rs") and f != "mod.rs")
    bad = 0
    too_long = []
    print(f"{'verb':<10} {'lines':>6} {'longest fn':>11}  imports of other verbs")
    for v in names:
        f = os.path.join(cmd, v + ".rs")
        code = without_cfg_test(blank_code(open(f, encoding="utf-8").read()))
        lines = sum(1 for l in code.splitlines() if l.strip())
        fns = functions(f)
        longest = max(fns, key=lambda r: r[2]) if fns else ("-", 0, 0)
        used = set(re.findall(r"\b(?:crate::cmd|super)::([a-z_][a-z0-9_]*)", code))
        used |= {n for g in re.findall(r"\b(?:crate::cmd|super)::\{([^}]*)\}", code)
                 for n in re.findall(r"(?:^|,)\s*([a-z_][a-z0-9_]*)", g)}
        others = sorted(u for u in used if u in names and u != v)
        bad += bool(others)
        print(f"{v:<10} {lines:>6} {longest[2]:>5} {longest[0]:<20} {', '.join(others) or '-'}")
        if max_fn is not None and longest[2] > max_fn:
            too_long.append(f"{v} {longest[0]} ({longest[2]} lines)")
    print(f"verbs importing another verb: {bad}")
    if max_fn is not None:
        print(f"verbs whose longest function is over {max_fn} lines: {len(too_long)}"
              + (": " + ", ".join(too_long) if too_long else ""))
    return 1 if bad or too_long else 0


def words(_args):
    import subprocess
    pat = re.compile(r"\bseed[ _-]?0[0-9]{2}", re.I)
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    hits = 0
    for f in files:
        try:
            text = open(os.path.join(ROOT, f), encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        for i, line in enumerate(text.splitlines(), 1):
            if pat.search(line):
                hits += 1
                print(f"{f}:{i}: {line.strip()[:120]}")
    print(f"references cited by number: {hits}")
    return 1 if hits else 0


def main():
    cmds = {"lengths": lengths, "loops": loops, "verbs": verbs, "words": words}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        print("usage: bench/house-audit.py lengths [--over N] [--top K] | loops | verbs [--max-fn N] | words", file=sys.stderr)
        return 2
    try:
        return cmds[sys.argv[1]](sys.argv[2:])
    except Usage as e:
        print(f"house-audit: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
