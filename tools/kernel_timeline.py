#!/usr/bin/env python3
"""Where a decode step's time goes, from tools/kernel_trace.cpp's records.

Kernels of one step overlap (programmatic dependent launch), so a kernel's own
duration says little. Each kernel is charged instead with how far it moved the
step's end: its end minus the latest end of everything launched before it (0 if it
ended earlier). A step's charges add up to its time, the gap before its first
kernel included (charged to that kernel and also reported on its own).

  kernel_timeline.py trace.txt [--layer-kernels]
  kernel_timeline.py trace.txt --edges moe_gate_up,down_part,shared_expert_add [--after 1]

Steps are the replays of the most frequent CUDA graph (zinc bench's decode step).

--edges finds every run of consecutive kernels whose names contain those words in that
order (and the --after kernels that follow) and prints each one's first start and last
end relative to the run's first kernel's start, averaged over every run of every step:
where a chain of kernels waits on one another, which the charges alone do not show.

  kernel_timeline.py trace.txt --occupancy [--sms 132]

--occupancy lists each kernel of the step with its launch (from traces that record it):
blocks, threads, registers, shared memory, how many of its blocks fit on an SM and
what limits that (Hopper: 64K registers allocated 256 a warp, 2048 threads, 32 blocks,
the SM's configured shared memory with 1 KB reserved a block; clusters not modelled), and
its waves.
"""
import argparse
import collections
import math
import re
import shutil
import subprocess
from dataclasses import dataclass


def short(name):
    """A demangled kernel name without its namespaces and parameter list."""
    name = re.sub(r"^void ", "", name)
    name = name.replace("(anonymous namespace)::", "").replace("zinc::cuda::", "").replace("(zinc::DType)", "T")
    return re.sub(r"\(.*$", "", name)


def demangle(names):
    """{mangled: readable}, the names themselves where c++filt is not on PATH."""
    names = list(names)
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
    return dict(zip(names, out))


_FIELD = re.compile(r" (\w+)=(\S+)$")


def read_trace(path):
    """Records (start, end, graph node, name, launch), by start; mangled names demangled
    where c++filt is; launch is {field: value} of the key=value fields after the name
    (empty for copies and older traces)."""
    recs = []
    with open(path) as f:
        for line in f:
            s, e, node, rest = line.rstrip("\n").split(" ", 3)
            launch = {}
            while (m := _FIELD.search(rest)):  # key=value fields after the name
                launch[m.group(1)] = m.group(2)
                rest = rest[:m.start()]
            recs.append((int(s), int(e), int(node), rest, launch))
    plain = demangle(sorted({r[3] for r in recs if r[3].startswith("_Z")}))
    recs = [(s, e, node, short(plain.get(name, name)), launch) for s, e, node, name, launch in recs]
    return sorted(recs, key=lambda r: r[:4])


@dataclass
class Occupancy:
    blocks: int  # in the grid
    threads: int  # a block
    regs: int  # a thread
    smem: int  # bytes a block
    per_sm: int  # blocks an SM holds
    limit: str  # what sets per_sm
    waves: float  # blocks / (per_sm · SMs)


def occupancy(launch, sms=132):
    """How a launch's blocks fit on a Hopper SM; None without launch fields."""
    if "grid" not in launch:
        return None
    blocks = math.prod(int(v) for v in launch["grid"].split(","))
    threads = math.prod(int(v) for v in launch["block"].split(","))
    regs, smem = int(launch["regs"]), int(launch["smem"])
    carve = int(launch.get("carve", 0)) or 228 * 1024
    warps = -(-threads // 32)
    warp_regs = -(-regs * 32 // 256) * 256  # registers are allocated 256 at a time a warp
    limits = {"blocks": 32, "threads": 2048 // threads,
              "registers": 65536 // (warp_regs * warps) if regs else 32,
              "shared memory": carve // (-(-smem // 128) * 128 + 1024) if smem else 32}
    limit = min(limits, key=lambda k: (limits[k], k != "blocks"))
    per_sm = limits[limit]
    return Occupancy(blocks, threads, regs, smem, per_sm, limit, blocks / (per_sm * sms) if per_sm else float("inf"))


def split_steps(recs, warmup=2):
    """The replays of the most frequent graph: lists of records in launch order."""
    graph = [r for r in recs if r[2] != 0]
    if not graph:
        raise SystemExit("no kernels from CUDA graphs in the trace")
    # A step starts at each replay of the node that most often comes first after a gap.
    first_nodes = collections.Counter()
    prev_end = None
    for r in graph:
        if prev_end is None or r[0] > prev_end:
            first_nodes[r[2]] += 1
        prev_end = r[1] if prev_end is None else max(prev_end, r[1])
    start_node = first_nodes.most_common(1)[0][0]
    steps, cur = [], []
    for r in graph:
        if r[2] == start_node and cur:
            steps.append(cur)
            cur = []
        cur.append(r)
    steps.append(cur)
    shape = collections.Counter(tuple(r[2] for r in s) for s in steps).most_common(1)[0][0]
    steps = [s for s in steps if tuple(r[2] for r in s) == shape]
    return steps[warmup:] if len(steps) > 4 * warmup else steps


@dataclass
class Timeline:
    steps: int
    names: list  # by position in the step
    charge: list  # ns per step, by position
    own: list  # ns per step, by position: end - start
    step_ns: float
    gap_ns: float


def charge_steps(steps):
    """Charges per step of steps[1:]; steps[0] only says where the first one's gap starts."""
    if len(steps) < 2:
        raise SystemExit("fewer than two steps in the trace")
    n = len(steps[0])
    charge, own = [0.0] * n, [0.0] * n
    gap = total = 0.0
    frontier = max(r[1] for r in steps[0])
    steps = steps[1:]
    for s in steps:
        begin = frontier
        gap += max(0, s[0][0] - frontier)
        for i, r in enumerate(s):
            charge[i] += max(0, r[1] - frontier)
            own[i] += r[1] - r[0]
            frontier = max(frontier, r[1])
        total += frontier - begin
    k = len(steps)
    return Timeline(k, [r[3] for r in steps[0]], [c / k for c in charge], [o / k for o in own], total / k, gap / k)


def edges(steps, words, after=0):
    """[(name, mean start, mean end)] relative to each run's first start, and the run count."""
    width = len(words) + after
    sums, runs, names = [[0.0, 0.0] for _ in range(width)], 0, None
    for s in steps:
        for i in range(len(s) - width + 1):
            if all(w in s[i + j][3] for j, w in enumerate(words)):
                t0 = s[i][0]
                for j in range(width):
                    sums[j][0] += s[i + j][0] - t0
                    sums[j][1] += s[i + j][1] - t0
                names = names or [r[3] for r in s[i:i + width]]
                runs += 1
    if not runs:
        return [], 0
    return [(names[j], sums[j][0] / runs, sums[j][1] / runs) for j in range(width)], runs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--layer-kernels", action="store_true",
                    help="also list the kernels around the second gdn_core and attention_split")
    ap.add_argument("--edges", metavar="WORD,WORD,...",
                    help="start and end of each kernel of every such run, relative to the run's start")
    ap.add_argument("--after", type=int, default=0, help="with --edges: kernels after the run to include")
    ap.add_argument("--occupancy", action="store_true", help="each kernel's launch, blocks an SM and waves")
    ap.add_argument("--sms", type=int, default=132, help="with --occupancy: the GPU's SMs (default 132: H100 / H200)")
    a = ap.parse_args()
    recs = read_trace(a.trace)
    if a.occupancy:
        seen = collections.OrderedDict()  # (name, launch) -> launches a step
        for r in split_steps(recs)[0]:
            key = (r[3], tuple(sorted(r[4].items())))
            seen[key] = seen.get(key, 0) + 1
        print(f"{'kernel':60} {'count':>5} {'blocks':>6} {'threads':>7} {'regs':>4} {'smem':>7} {'an SM':>5} "
              f"{'limit':13} {'waves':>5}")
        for (name, launch), count in seen.items():
            o = occupancy(dict(launch), a.sms)
            if o is None:
                raise SystemExit("the trace has no launch fields (a kernel_trace.cpp from before session 44)")
            print(f"{name[:60]:60} {count:5d} {o.blocks:6d} {o.threads:7d} {o.regs:4d} {o.smem:7d} {o.per_sm:5d} "
                  f"{o.limit:13} {o.waves:5.2f}")
        return
    if a.edges:
        rows, runs = edges(split_steps(recs), a.edges.split(","), a.after)
        if not runs:
            raise SystemExit(f"no run of {a.edges} in the steps")
        for name, start, end in rows:
            print(f"{name[:60]:60} start {start / 1000:7.2f} end {end / 1000:7.2f} us")
        print(f"({runs} runs)")
        return
    t = charge_steps(split_steps(recs))
    print(f"{t.steps} steps of {len(t.names)} kernels: {t.step_ns / 1000:.1f} us per step "
          f"(gap before the first kernel {t.gap_ns / 1000:.1f} us)")
    loose = collections.defaultdict(list)  # copies outside the graphs: the host's writes and reads
    for r in recs:
        if r[2] == 0 and r[3].startswith("memcpy:"):
            loose[r[3]].append(r[1] - r[0])
    for name, d in sorted(loose.items()):
        print(f"outside the graphs: {name} x{len(d)}, {sum(d) / len(d) / 1000:.2f} us each")
    by = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for i, nm in enumerate(t.names):
        by[nm][0] += 1
        by[nm][1] += t.charge[i]
        by[nm][2] += t.own[i]
    print(f"{'kernel':70} {'count':>5} {'charged us':>10} {'per launch':>10} {'own us':>8}")
    for nm, (c, ch, own) in sorted(by.items(), key=lambda x: -x[1][1]):
        print(f"{nm[:70]:70} {c:5d} {ch / 1000:10.1f} {ch / c / 1000:10.2f} {own / c / 1000:8.2f}")
    if a.layer_kernels:
        for kind in ("gdn_core", "attention_split"):
            idx = [i for i, nm in enumerate(t.names) if kind in nm]
            if len(idx) < 2:
                continue
            print(f"\nkernels around the second {kind} (charged / own us per step):")
            for j in range(max(0, idx[1] - 6), min(len(t.names), idx[1] + 9)):
                print(f"  {j:4d} {t.names[j][:80]:80} {t.charge[j] / 1000:7.2f} {t.own[j] / 1000:7.2f}")


if __name__ == "__main__":
    main()
