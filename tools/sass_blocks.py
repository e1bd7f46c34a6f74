#!/usr/bin/env python3
"""What a kernel's hot loop issues, from `cuobjdump -sass`: its basic blocks and
their instructions by opcode, counted before a change is measured on the GPU.

A kernel's unrolled inner step is one basic block (or a few alike), so the blocks with
the most of an opcode the step must issue (FFMA for a dot product) are the step, and
their size per weight is what a change to the step's arithmetic moves. PTX line counts
say little: ptxas schedules, fuses and rematerialises.

  nvcc -std=c++20 -arch=sm_90a -O3 --expt-relaxed-constexpr -I src -cubin \\
       src/backend/cuda/matvec.cu -o mv.cubin && cuobjdump -sass mv.cubin > mv.sass
  sass_blocks.py mv.sass 'matvec_kernel<\\(zinc::DType\\)12, 1>' [--by FFMA] [--with LDS] [--most 8]
                 [--compare old.sass]

--with keeps the blocks that also hold that opcode (LDS: the staged rows' steps, not
the direct rows' that read global memory).

  sass_blocks.py new.sass 'moe_gate_up_kernel' --same old.sass [--rename ', false>=>']

--same says, for each matching kernel, whether another build compiled it to the same
instructions (predicates and operands included, addresses aside): a change meant to
leave a kernel alone (a knob's other instance, a refactor) is checked before it is
measured. --rename rewrites this listing's names (a regular expression, re.sub) before
they are looked up in the other, for a kernel that gained a template parameter.

cuobjdump comes with the CUDA toolkit, or from PyPI (`pip download --no-deps
nvidia-cuda-cuobjdump`, a wheel to unzip). Kernel names are demangled with c++filt
where it is on PATH, and matched as a regular expression (re.search).
"""
import argparse
import collections
import re
import sys

from kernel_timeline import demangle  # tools/, beside this script

_INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
_TARGET = re.compile(r"0x([0-9a-f]+)")
_ENDS = ("BRA", "BRX", "JMP", "JMX", "CALL", "BREAK", "RET", "EXIT")  # end a block
_TARGETED = _ENDS + ("BSSY",)  # name an address a block starts at (BSSY: where a branch reconverges)


def _functions(text, parse):
    """{mangled name: [parse(line) of each instruction line]} in program order."""
    funcs, name = {}, None
    for line in text.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            name = m.group(1)
            funcs[name] = []
            continue
        item = parse(line)
        if item is not None and name is not None:
            funcs[name].append(item)
    return funcs


def read_functions(text):
    """{mangled name: [(address, opcode, operands)]} in program order."""
    def parse(line):
        m = _INSTR.match(line)
        return (int(m.group(1), 16), m.group(3), m.group(4).strip()) if m else None
    return _functions(text, parse)


_TEXT = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+([^;]*);")


def read_code(text):
    """{mangled name: [instruction text without its address]}: what --same compares."""
    def parse(line):
        m = _TEXT.match(line)
        return " ".join(m.group(1).split()) if m else None
    return _functions(text, parse)


def same_code(path, other, pattern, rename=()):
    """Lines saying, for each kernel of `path` matching `pattern`, whether `other` holds
    the same instructions under the same readable name (after each (regex, repl) of rename)."""
    listings = []
    for p in (path, other):
        with open(p) as f:
            listings.append(read_code(f.read()))
    mine, theirs = listings
    names, their_names = demangle(mine), demangle(theirs)
    by_name = {their_names[m]: code for m, code in theirs.items()}
    lines = []
    for mangled, code in mine.items():
        name = names[mangled]
        if not re.search(pattern, name):
            continue
        key = name
        for old, new in rename:
            key = re.sub(old, new, key)
        base_code = by_name.get(key)
        if base_code is None:
            verdict = "not in the other listing"
        elif base_code == code:
            verdict = "same instructions"
        else:
            verdict = f"differs ({len(base_code)} instructions there)"
        lines.append(f"{name}: {len(code)} instructions, {verdict}")
    return lines


def base(opcode):
    """FFMA.FTZ -> FFMA."""
    return opcode.split(".")[0]


def basic_blocks(instrs):
    """The instructions split where a branch or reconvergence point lands and after each
    branch: [(start address, [opcode, ...])]."""
    starts = set()
    for _, op, args in instrs:
        if base(op) in _TARGETED:
            m = _TARGET.search(args)
            if m:
                starts.add(int(m.group(1), 16))
    blocks, cur, start = [], [], None
    for addr, op, _ in instrs:
        if addr in starts and cur:
            blocks.append((start, cur))
            cur = []
        if not cur:
            start = addr
        cur.append(op)
        if base(op) in _ENDS:
            blocks.append((start, cur))
            cur = []
    if cur:
        blocks.append((start, cur))
    return blocks


def hot_blocks(instrs, by="FFMA", most=8, with_ops=()):
    """The blocks with the most `by` instructions (then the largest) that hold every
    opcode of `with_ops`: [(start, size, Counter of opcodes)]."""
    rows = []
    for start, ops in basic_blocks(instrs):
        mix = collections.Counter(base(op) for op in ops)
        if mix[by] and all(mix[op] for op in with_ops):
            rows.append((start, len(ops), mix))
    rows.sort(key=lambda r: (-r[2][by], -r[1], r[0]))
    return rows[:most]


def report(path, pattern, by, most, with_ops=()):
    """Lines describing each kernel of `path` whose readable name matches `pattern`."""
    with open(path) as f:
        funcs = read_functions(f.read())
    names = demangle(funcs)
    lines = []
    for mangled, instrs in funcs.items():
        if not re.search(pattern, names[mangled]):
            continue
        lines.append(f"{names[mangled]}: {len(instrs)} instructions")
        for start, size, mix in hot_blocks(instrs, by, most, with_ops):
            top = " ".join(f"{op} {n}" for op, n in mix.most_common(10))
            lines.append(f"  block {start:#07x}: {size:4d} instructions, {by} {mix[by]:3d} | {top}")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sass", help="cuobjdump -sass output")
    ap.add_argument("kernel", help="regular expression on the demangled kernel name")
    ap.add_argument("--by", default="FFMA", help="rank blocks by this opcode (default FFMA)")
    ap.add_argument("--with", dest="with_ops", action="append", default=[], metavar="OPCODE",
                    help="only blocks that also hold this opcode (repeatable)")
    ap.add_argument("--most", type=int, default=8, help="blocks shown per kernel (default 8)")
    ap.add_argument("--compare", metavar="SASS", help="another build's cuobjdump -sass output, shown first")
    ap.add_argument("--same", metavar="SASS", help="say which kernels another build compiled identically")
    ap.add_argument("--rename", action="append", default=[], metavar="FROM=TO",
                    help="with --same: re.sub on this listing's names before the lookup (repeatable)")
    args = ap.parse_args(argv)
    if args.same:
        rename = [r.split("=", 1) for r in args.rename]
        lines = same_code(args.sass, args.same, args.kernel, rename)
        print("\n".join(lines) if lines else f"no kernel matches {args.kernel!r}")
        return 0
    for path in ([args.compare] if args.compare else []) + [args.sass]:
        lines = report(path, args.kernel, args.by, args.most, args.with_ops)
        print(f"== {path}")
        print("\n".join(lines) if lines else f"no kernel matches {args.kernel!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
