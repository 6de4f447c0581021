#!/usr/bin/env python3
"""Reports import cycles between modules in every crate of the workspace.

For each module directory the graph is: nodes = the module's own file ("self") and its child
modules; an edge A -> B when a file of A names an item of B by a `crate::`, `super::`, `self::`
or child-module path (also inside `use` groups; a name reached through a `pub use` re-export
counts for the module that defines it), and from a module to a child whose items it re-exports.
A cycle among siblings (or between a child and its parent's own file) is reported. Exit status 1
if any cycle exists. Method calls are not seen (it reads text); cargo-modules sees them:
`cargo modules dependencies -p CRATE --lib --no-externs --no-sysroot --no-fns --no-traits
--no-types` gives the same module graph with those edges.
Usage: scripts/module_cycles.py [CRATE_SRC_DIR ...]   (default: every crates/*/src and src)
       scripts/module_cycles.py --cargo-modules     the same question asked of cargo-modules
       (`cargo install cargo-modules --version 0.27.0 --locked`), which sees method calls too:
       a cycle among the modules of its `uses` graph of each package (tests modules left out)
"""
import os, re, sys

def rust_files(src):
    for root, _, files in os.walk(src):
        for f in files:
            if f.endswith('.rs'):
                yield os.path.join(root, f)

def module_path(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ('lib', 'main', 'mod'):
        rel = rel[:-1]
    return tuple(rel)

def strip_comments(text):
    text = re.sub(r'//[^\n]*', '', text)
    text = re.sub(r'/\*.*?\*/', '', text, flags=re.S)
    text = re.sub(r'"(\\.|[^"\\])*"', '""', text)
    return text

def expand_group(body):
    """`a::{b, c::d}` -> [a::b, a::c::d] (one level of braces is enough in practice)."""
    out, depth, cur = [], 0, ''
    for ch in body:
        if ch == '{': depth += 1
        if ch == '}': depth -= 1
        if ch == ',' and depth == 0:
            out.append(cur.strip()); cur = ''
        else:
            cur += ch
    if cur.strip(): out.append(cur.strip())
    paths = []
    for item in out:
        m = re.match(r'([\w:]*?)::\{(.*)\}$', item, flags=re.S)
        if m:
            paths += [m.group(1) + '::' + p for p in expand_group(m.group(2))]
        else:
            paths.append(item)
    return paths

def references(text, here):
    refs = []
    for m in re.finditer(r'\b(crate|super|self)((?:::\w+)*)::\{', text):
        start = m.end()
        depth, i = 1, start
        while depth and i < len(text):
            depth += {'{': 1, '}': -1}.get(text[i], 0); i += 1
        for p in expand_group(text[start:i - 1]):
            refs.append(m.group(1) + m.group(2) + '::' + p)
    for m in re.finditer(r'\b((?:crate|super|self)(?:::\w+)+)', text):
        refs.append(m.group(1))
    # relative paths to a child module declared in this file (`mod child;` ... `child::f()`)
    for child in re.findall(r'^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;', text, flags=re.M):
        for m in re.finditer(r'(?<![\w:])' + child + r'((?:::\w+)*)::\{', text):
            start = m.end(); depth, i = 1, start
            while depth and i < len(text):
                depth += {'{': 1, '}': -1}.get(text[i], 0); i += 1
            for p in expand_group(text[start:i - 1]):
                refs.append('self::' + child + m.group(1) + '::' + p)
        for m in re.finditer(r'(?<![\w:])(' + child + r'(?:::\w+)+)', text):
            refs.append('self::' + m.group(1))
    out = []
    for r in refs:
        parts = [p for p in r.split('::') if p and not p.startswith(' ')]
        parts = [p.split(' as ')[0].strip() for p in parts]
        if not parts: continue
        if parts[0] == 'crate':
            base = []
        elif parts[0] == 'self':
            base = list(here)
        else:
            base = list(here)
            while parts and parts[0] == 'super':
                base = base[:-1]; parts = parts[1:]
            parts = ['x'] + parts
        out.append(tuple(base) + tuple(p for p in parts[1:] if p not in ('self',)))
    return out

def inline_modules(text, here):
    """The file's text split into its own part and its inline `mod name { ... }` blocks, each
    with the module path its `super::`/`self::` paths are relative to (the edges still count
    for the file's module: an inline module is part of its file)."""
    out, own, pos = [], [], 0
    for m in re.finditer(r'\bmod\s+(\w+)\s*\{', text):
        if m.start() < pos:
            continue
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {'{': 1, '}': -1}.get(text[i], 0)
            i += 1
        own.append(text[pos:m.start()])
        out += inline_modules(text[m.end():i - 1], here + (m.group(1),))
        pos = i
    own.append(text[pos:])
    return [(here, ''.join(own))] + out


PUB_USE = re.compile(r'^\s*pub(?:\([^)]*\))?\s+use\s+([^;]+);', re.M)


def resolve(path, here):
    """A `crate::`/`super::`/`self::`/child path, already split, to an absolute tuple."""
    parts = list(path)
    if parts[0] == 'crate':
        return tuple(parts[1:])
    base = list(here)
    if parts[0] == 'self':
        return tuple(base + parts[1:])
    while parts and parts[0] == 'super':
        base = base[:-1]
        parts = parts[1:]
    return tuple(base + parts)


def check(src):
    modules = {}
    for f in rust_files(src):
        modules.setdefault(module_path(src, f), []).append(f)
    known = set(modules)
    texts = {mp: strip_comments('\n'.join(open(f, encoding='utf-8').read() for f in files))
             for mp, files in modules.items()}
    # `pub use` re-exports: a name a module offers that is defined elsewhere. A re-export is
    # namespace, not code: the module that re-exports does not depend on what it re-exports,
    # and whoever names the re-exported path depends on where the item really lives.
    reexports = {}
    for mp, text in texts.items():
        children = set(re.findall(r'^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;', text, flags=re.M))
        for m in PUB_USE.finditer(text):
            for p in expand_group(m.group(1)):
                p = p.strip()
                alias = None
                if ' as ' in p:
                    p, alias = [x.strip() for x in p.split(' as ')]
                segs = [x for x in p.split('::') if x]
                if not segs or segs[-1] == '*':
                    continue
                if segs[0] in children:
                    segs = ['self'] + segs
                if segs[0] not in ('crate', 'super', 'self'):
                    continue  # another crate's item
                reexports.setdefault(mp, {})[alias or segs[-1]] = resolve(segs, mp)

    def target_of(ref, depth=0):
        for k in range(len(ref), -1, -1):
            if ref[:k] in known:
                mod = ref[:k]
                if k < len(ref) and depth < 8:
                    again = reexports.get(mod, {}).get(ref[k])
                    if again is not None:
                        return target_of(again + ref[k + 1:], depth + 1)
                return mod
        return ()

    edges = set()
    for mp, text in texts.items():
        for ref in (r for here, part in inline_modules(text, mp) for r in references(PUB_USE.sub('', part), here)):
            target = target_of(ref)
            if target != mp:
                edges.add((mp, target))
        # a re-export is an edge too (as cargo-modules counts it): a module that re-exports its
        # children must not be needed by them
        for name, where in reexports.get(mp, {}).items():
            target = target_of(where)
            if target != mp and target[:len(mp)] == mp:
                edges.add((mp, target))
    cycles = []
    # at each module level: nodes are the module's own file and its children (each child
    # standing for everything below it)
    parents = {m[:-1] for m in known if m} | {()}
    for parent in parents:
        def node(m):
            if m[:len(parent)] != parent:
                return None
            if len(m) == len(parent):
                return 'self'
            return m[len(parent)]
        g = {}
        for a, b in edges:
            na, nb = node(a), node(b)
            if na is None or nb is None or na == nb:
                continue
            g.setdefault(na, set()).add(nb)
        for scc in tarjan(g):
            if len(scc) > 1:
                cycles.append(('::'.join(('crate',) + parent), sorted(scc), g))
    return cycles


def tarjan(g):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    nodes = set(g) | {b for bs in g.values() for b in bs}
    sys.setrecursionlimit(10000)
    def visit(v):
        index[v] = low[v] = counter[0]; counter[0] += 1
        stack.append(v); on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop(); on.discard(w); scc.append(w)
                if w == v: break
            out.append(scc)
    for v in sorted(nodes):
        if v not in index: visit(v)
    return out

def cargo_modules():
    """Runs cargo-modules on every package of the workspace; cycles in its `uses` graph."""
    import json
    import subprocess
    meta = json.loads(subprocess.run(['cargo', 'metadata', '--no-deps', '--format-version', '1'],
                                     capture_output=True, text=True, check=True).stdout)
    bad = 0
    for pkg in meta['packages']:
        for target in pkg['targets']:
            kind = target['kind'][0]
            if kind not in ('lib', 'bin'):
                continue
            which = ['--lib'] if kind == 'lib' else ['--bin', target['name']]
            dot = subprocess.run(['cargo', 'modules', 'dependencies', '-p', pkg['name'], *which, '--no-externs',
                                  '--no-sysroot', '--no-fns', '--no-traits', '--no-types'],
                                 capture_output=True, text=True, check=True).stdout
            g = {}
            for m in re.finditer(r'"([^"]+)" -> "([^"]+)" \[label="uses"', dot):
                a, b = m.groups()
                if a != b and '::tests' not in a and '::tests' not in b:
                    g.setdefault(a, set()).add(b)
            cycles = [scc for scc in tarjan(g) if len(scc) > 1]
            for scc in cycles:
                print(f'{pkg["name"]} ({kind}): cycle: {" <-> ".join(sorted(scc))}')
            bad += len(cycles)
            if not cycles:
                print(f'{pkg["name"]} ({kind}): no cycle among {len(g)} modules that use others')
    if bad:
        print(f'{bad} import cycle(s)')
        sys.exit(1)


def main():
    if sys.argv[1:] == ['--cargo-modules']:
        return cargo_modules()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    srcs = sys.argv[1:] or sorted(
        [os.path.join(root, 'crates', c, 'src') for c in os.listdir(os.path.join(root, 'crates'))] +
        [os.path.join(root, 'src')])
    bad = 0
    for src in srcs:
        for where, scc, g in check(src):
            bad += 1
            print(f'{os.path.relpath(src, root)}: cycle in {where}: {" <-> ".join(scc)}')
            for a in scc:
                print(f'    {a} -> {", ".join(sorted(b for b in g.get(a, ()) if b in scc))}')
    if bad:
        print(f'{bad} import cycle(s)'); sys.exit(1)
    print(f'no import cycles in {len(srcs)} crate source trees')

main()
