"""tools/kernel_timeline.py: steps found in a trace, and each kernel charged with how
far it moved the step's end."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import kernel_timeline  # noqa: E402


def write_trace(lines):
    f = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
    f.write("".join(f"{s} {e} {node} {name}\n" for s, e, node, name in lines))
    f.close()
    return f.name


class KernelTimeline(unittest.TestCase):
    def test_charges_add_up_to_the_step(self):
        # Each step: a (0-10), b overlapping a (5-25), c ending inside b (12-20), then a
        # gap of 5 before the next step; a copy outside the graph in between.
        lines = []
        for k in range(12):
            t = 30 * k
            lines += [(t, t + 10, 7, "_Z1av"), (t + 5, t + 25, 8, "void zinc::cuda::b_kernel<(zinc::DType)12>(int)"),
                      (t + 12, t + 20, 9, "c"), (t + 26, t + 27, 0, "memcpy:DtoH:4")]
        path = write_trace(lines)
        try:
            recs = kernel_timeline.read_trace(path)
            steps = kernel_timeline.split_steps(recs)
            self.assertEqual(len(steps), 10)  # two dropped as warm-up
            t = kernel_timeline.charge_steps(steps)  # the first of them only as a reference
            self.assertEqual(t.steps, 9)
        finally:
            os.unlink(path)
        self.assertEqual(t.names[1], "b_kernel<T12>")
        self.assertEqual(t.step_ns, 30)
        self.assertEqual(t.gap_ns, 5)
        # a: the gap of 5 and its own 10; b: from a's end to its own; c: nothing.
        self.assertEqual(t.charge, [15, 15, 0])
        self.assertEqual(t.own, [10, 20, 8])
        self.assertEqual(sum(t.charge), t.step_ns)

    def test_the_most_frequent_graph_is_the_step(self):
        lines = [(0, 100, 1, "prefill")]
        for k in range(6):
            t = 200 + 20 * k
            lines += [(t, t + 5, 7, "a"), (t + 5, t + 15, 8, "b")]
        path = write_trace(lines)
        try:
            steps = kernel_timeline.split_steps(kernel_timeline.read_trace(path))
        finally:
            os.unlink(path)
        self.assertEqual([[r[3] for r in s] for s in steps], [["a", "b"]] * 6)

    def test_edges_average_each_run_from_its_first_start(self):
        # Per step two runs of a -> b -> c and one kernel after: run 1 at t, run 2 at t + 100.
        lines = []
        for k in range(8):
            t = 1000 * k
            for r, (d, e) in enumerate([(2, 12), (4, 16)]):
                u = t + 100 * r
                lines += [(u, u + 10, 10 + 4 * r, "moe_gate_up_kernel"), (u + d, u + e, 11 + 4 * r, "down_part"),
                          (u + 9, u + 20, 12 + 4 * r, "shared_expert_add"), (u + 18, u + 30, 13 + 4 * r, "row_norm")]
        path = write_trace(lines)
        try:
            steps = kernel_timeline.split_steps(kernel_timeline.read_trace(path))
        finally:
            os.unlink(path)
        rows, runs = kernel_timeline.edges(steps, ["gate_up", "down_part", "shared_expert_add"], after=1)
        self.assertEqual(runs, 2 * len(steps))
        self.assertEqual([name for name, _, _ in rows],
                         ["moe_gate_up_kernel", "down_part", "shared_expert_add", "row_norm"])
        self.assertEqual([(s, e) for _, s, e in rows], [(0, 10), (3, 14), (9, 20), (18, 30)])
        self.assertEqual(kernel_timeline.edges(steps, ["down_part", "gate_up"]), ([], 0))

    def test_launch_fields_and_occupancy(self):
        # gate_up's one-token launch: 512 blocks of 256 threads at 64 registers fill the registers at 4 an SM.
        launch = "grid=64,8,1 block=256,1,1 regs=64 smem=30000 carve=233472 cluster=1"
        path = write_trace([(0, 9, 5, f"_Z7gate_upv {launch}"), (2, 4, 0, "memcpy:HtoD:4")])
        try:
            recs = kernel_timeline.read_trace(path)
        finally:
            os.unlink(path)
        self.assertEqual(recs[0][3], "gate_up")
        self.assertEqual(recs[0][4]["grid"], "64,8,1")
        self.assertEqual(recs[1][3:], ("memcpy:HtoD:4", {}))
        o = kernel_timeline.occupancy(recs[0][4])
        self.assertEqual((o.blocks, o.threads, o.per_sm, o.limit), (512, 256, 4, "registers"))
        self.assertAlmostEqual(o.waves, 512 / (4 * 132))
        # 48 registers: five blocks; 41 registers round up to 48 (256 a warp).
        for regs in (48, 41):
            o = kernel_timeline.occupancy({"grid": "64,8,1", "block": "256,1,1", "regs": str(regs), "smem": "12000"})
            self.assertEqual((o.per_sm, o.limit), (5, "registers"))
        # A 1024-thread norm is held to two by threads; 100 KB of shared memory to two by shared memory.
        o = kernel_timeline.occupancy({"grid": "1,1,1", "block": "1024,1,1", "regs": "16", "smem": "0"})
        self.assertEqual((o.per_sm, o.limit), (2, "threads"))
        o = kernel_timeline.occupancy({"grid": "264,1,1", "block": "128,1,1", "regs": "32", "smem": "100000"})
        self.assertEqual((o.per_sm, o.limit, o.waves), (2, "shared memory", 1.0))
        self.assertIsNone(kernel_timeline.occupancy({}))


if __name__ == "__main__":
    unittest.main()
