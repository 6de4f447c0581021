#!/usr/bin/env python3
"""Per-call profile from callgrind runs of scripts/instructions-vs-kamailio.sh.

Usage: callgrind_per_call.py CALLS TOP CALL_RUN_FILES... -- IDLE_RUN_FILES...

Runs callgrind_annotate (self and inclusive cost of every function) on each file, sums the files
of a run (a multi-process server writes one per process), subtracts the idle run from the call
run and divides by CALLS: what each function costs per call, with the server's start-up,
shutdown and timer work of equal wall time cancelled. Prints the split by object (the server's
own code, libc, the dynamic loader, ...) and the TOP functions by self and by inclusive cost.
"""
import collections
import os
import re
import subprocess
import sys

LINE = re.compile(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*\S)\s*$")
OBJECT = re.compile(r"^(.*) \[(/[^\]]*)\]$")
# The source file before the function: a path without spaces ending in a source file's
# extension, or '???' when the object has no debug information.
SOURCE = re.compile(r"^(\?\?\?|\S*?\.(?:rs|c|h|S|cc|cpp|inc)):(.*)$")
OBJECTS = {}


def annotate(path, inclusive):
    """{function: Ir} of one callgrind output file, self or inclusive cost."""
    out = subprocess.run(
        ["callgrind_annotate", "--threshold=100", "--auto=no", f"--inclusive={'yes' if inclusive else 'no'}", path],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    costs = collections.Counter()
    for line in out.splitlines():
        m = LINE.match(line)
        if m and m.group(2) != "PROGRAM TOTALS":
            fn, ir = function(m.group(2)), int(m.group(1).replace(",", ""))
            # Self cost: the pieces of a function (its lines in several source files) add up.
            # Inclusive: callgrind_annotate gives each piece the cost of the whole call tree
            # below the function, so the pieces would count it twice; the largest is the
            # function's.
            costs[fn] = max(costs[fn], ir) if inclusive else costs[fn] + ir
    return costs


def summed(paths, inclusive):
    total = collections.Counter()
    for p in paths:
        total.update(annotate(p, inclusive))
    return total


def function(entry):
    """'file:function [object]' -> 'function [object]': the costs of one function inlined from
    several source files are summed. callgrind_annotate names the object only on some lines, so
    the object is remembered from the lines that name it."""
    obj = ""
    m = OBJECT.match(entry)
    if m:
        entry, obj = m.group(1), os.path.basename(m.group(2))
    m = SOURCE.match(entry)
    if m:
        entry = m.group(2)
    if obj:
        OBJECTS[entry] = obj
    return entry


def object_of(fn):
    return OBJECTS.get(fn, "?")


def main():
    calls, top = int(sys.argv[1]), int(sys.argv[2])
    rest = sys.argv[3:]
    sep = rest.index("--")
    busy, idle = rest[:sep], rest[sep + 1 :]
    for inclusive in (False, True):
        diff = summed(busy, inclusive)
        diff.subtract(summed(idle, inclusive))
        if not inclusive:
            objects = collections.Counter()
            for name, ir in diff.items():
                objects[object_of(name)] += ir
            total = sum(objects.values())
            print(f"# per call, by object (self cost; total {total / calls:,.0f})")
            for obj, ir in objects.most_common():
                if abs(ir) / calls >= 50:
                    print(f"{ir / calls:12,.0f}  {obj}")
            print()
        kind = "inclusive" if inclusive else "self"
        print(f"# per call, top {top} functions by {kind} cost (call run - idle run) / {calls}")
        for name, ir in diff.most_common(top):
            print(f"{ir / calls:12,.0f}  {name}  [{object_of(name)}]")
        print()


if __name__ == "__main__":
    main()
