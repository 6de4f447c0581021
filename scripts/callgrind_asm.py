#!/usr/bin/env python3
"""Per-instruction self cost of one function in a callgrind profile, beside its disassembly.

`callgrind_annotate --auto=yes` gives the cost per source line, which for code as inlined as the
header scan (one function holding the loop, the name table's match, the line-end search and the
index note) leaves the loop's shape hidden: where the compiler kept a value on the stack, which
constant it loads again at each step, which instructions run once a line and which once a
message. This prints every instruction of the function's executed range with the number of
times it ran (divided by DIVISOR, e.g. the number of messages or lines), and the total, so that
a change's effect can be read per instruction.

The profile must have been recorded with `--dump-instr=yes` (the addresses are those of the
binary's own disassembly, also for a position-independent one), and BINARY must be the very
file that was profiled (copy it out of the target directory first).

Usage: scripts/callgrind_asm.py PROFILE BINARY FUNCTION [DIVISOR]
  FUNCTION   a substring of the function's name as callgrind writes it, e.g.
             'Head::scan_avx2' or 'Message>::check'; every function that matches is summed.
Example:
  valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file=cg.out \\
      /tmp/x/receive_cost check 2000
  scripts/callgrind_asm.py cg.out /tmp/x/receive_cost 'Head::scan_avx2' 2000
"""
import collections
import re
import subprocess
import sys


def position(token, previous):
    """A position of the callgrind format: absolute, relative (+n, -n) or the same (*)."""
    if token == "*":
        return previous
    if token[0] in "+-":
        return previous + int(token, 0)
    return int(token, 0)


def self_costs(profile, function):
    """Instruction address -> self cost (the first event) of the functions named like `function`."""
    costs = collections.Counter()
    names = {}
    current = None
    after_calls = False
    address = line = 0
    with open(profile) as f:
        header = True
        for raw in f:
            raw = raw.rstrip("\n")
            if header and raw.startswith("positions:"):
                if "instr" not in raw.split():
                    sys.exit(f"{profile}: recorded without --dump-instr=yes")
            named = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?$", raw)
            if named:
                header = False
                kind, key, name = named.groups()
                if name:
                    names[key] = name
                if kind == "fn":
                    current = names.get(key, "")
                    after_calls = False
                continue
            if raw.startswith("calls="):
                # The next cost line is the call's inclusive cost, not the caller's own.
                after_calls = True
                continue
            if not raw or not (raw[0].isdigit() or raw[0] in "+-*"):
                continue
            parts = raw.split()
            address = position(parts[0], address)
            if len(parts) > 1:
                line = position(parts[1], line)
            if after_calls:
                after_calls = False
                continue
            if current and function in current and len(parts) > 2:
                costs[address] += int(parts[2])
    return costs


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    profile, binary, function = sys.argv[1:4]
    divisor = float(sys.argv[4]) if len(sys.argv) == 5 else 1.0
    costs = self_costs(profile, function)
    if not costs:
        sys.exit(f"no function of {profile} is named like {function!r}")
    low, high = min(costs), max(costs)
    listing = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", "-C", f"--start-address={low:#x}", f"--stop-address={high + 16:#x}", binary],
        capture_output=True, text=True, check=True,
    ).stdout
    shown = 0
    for text in listing.splitlines():
        instruction = re.match(r"\s*([0-9a-f]+):\s*(.*)", text)
        if not instruction:
            continue
        address = int(instruction.group(1), 16)
        count = costs.get(address, 0)
        shown += count
        print(f"{count / divisor:>10.2f} {address:8x}: {instruction.group(2)}")
    total = sum(costs.values())
    print(f"total {total / divisor:.2f} (of which {shown / divisor:.2f} at the listed addresses)")


if __name__ == "__main__":
    main()
