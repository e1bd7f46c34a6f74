"""tools/sass_blocks.py: basic blocks of a cuobjdump -sass listing and the hot ones."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import sass_blocks  # noqa: E402

# Two kernels as cuobjdump prints them (encodings on the instruction's line and the next).
LISTING = """
\tcode for sm_90a
\t\tFunction : _Z4stepv
\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                        /* 0x00000a00ff017b82 */
                                                                                 /* 0x000fe40000000800 */
        /*0010*/                   BSSY B0, 0x0060 ;
        /*0020*/               @!P0 BRA 0x0050 ;
        /*0030*/                   LDS.128 R4, [R2] ;
        /*0040*/                   FFMA R8, R4, R5, R8 ;
        /*0050*/                   FFMA.FTZ R8, R6, R7, R8 ;
        /*0060*/                   BSYNC B0 ;
        /*0070*/                   PRMT R9, R4, 0x7044, R3 ;
        /*0080*/                   FFMA R8, R9, R5, R8 ;
        /*0090*/                   FFMA R8, R9, R6, R8 ;
        /*00a0*/                   FFMA R8, R9, R7, R8 ;
        /*00b0*/               @P1 BRA 0x0070 ;
        /*00c0*/                   EXIT ;
\t\t..........
\t\tFunction : _Z5otherv
        /*0000*/                   FADD R1, R2, R3 ;
        /*0010*/                   EXIT ;
"""


class SassBlocks(unittest.TestCase):
    def setUp(self):
        self.funcs = sass_blocks.read_functions(LISTING)

    def test_reads_every_function_in_order(self):
        self.assertEqual(list(self.funcs), ["_Z4stepv", "_Z5otherv"])
        step = self.funcs["_Z4stepv"]
        self.assertEqual(len(step), 13)
        self.assertEqual(step[4], (0x40, "FFMA", "R8, R4, R5, R8"))
        self.assertEqual(step[5][1], "FFMA.FTZ")

    def test_blocks_split_at_targets_and_after_branches(self):
        blocks = sass_blocks.basic_blocks(self.funcs["_Z4stepv"])
        starts = [start for start, _ in blocks]
        # 0x50 (a branch target), 0x60 (BSSY's join point), 0x70 (the loop's head), after each BRA and EXIT.
        self.assertEqual(starts, [0x0, 0x30, 0x50, 0x60, 0x70, 0xC0])
        self.assertEqual(blocks[4][1], ["PRMT", "FFMA", "FFMA", "FFMA", "BRA"])

    def test_hot_blocks_rank_by_the_opcode_then_size(self):
        rows = sass_blocks.hot_blocks(self.funcs["_Z4stepv"], by="FFMA", most=2)
        self.assertEqual([(start, size, mix["FFMA"]) for start, size, mix in rows], [(0x70, 5, 3), (0x30, 2, 1)])
        only_lds = sass_blocks.hot_blocks(self.funcs["_Z4stepv"], with_ops=("LDS",))
        self.assertEqual([start for start, _, _ in only_lds], [0x30])

    def test_report_matches_kernels_by_name(self):
        f = tempfile.NamedTemporaryFile("w", suffix=".sass", delete=False)
        f.write(LISTING)
        f.close()
        try:
            lines = sass_blocks.report(f.name, r"step", "FFMA", 8)
        finally:
            os.unlink(f.name)
        self.assertTrue(lines[0].endswith(": 13 instructions"), lines[0])
        self.assertIn("block 0x00070:    5 instructions, FFMA   3 | FFMA 3 PRMT 1 BRA 1", lines[1])
        self.assertEqual(len(lines), 4)  # the kernel, then its three blocks holding an FFMA

    def test_same_code_compares_instructions_but_not_addresses(self):
        # The other build: step at other addresses (same code), other with a predicate changed, and
        # a kernel this listing lacks; this listing's step2 is step renamed.
        other = LISTING.replace("/*00", "/*10").replace("FADD R1, R2, R3", "@P0 FADD R1, R2, R3")
        step = LISTING[LISTING.index("Function : _Z4stepv"):LISTING.index("Function : _Z5otherv")]
        mine = LISTING + "\t\t" + step.replace("_Z4stepv", "_Z5step2v")
        paths = []
        for text in (mine, other):
            f = tempfile.NamedTemporaryFile("w", suffix=".sass", delete=False)
            f.write(text)
            f.close()
            paths.append(f.name)
        try:
            plain = sass_blocks.same_code(paths[0], paths[1], r"")
            renamed = sass_blocks.same_code(paths[0], paths[1], r"step2", [("step2", "step")])
        finally:
            for p in paths:
                os.unlink(p)
        names = sass_blocks.demangle(["_Z4stepv", "_Z5otherv", "_Z5step2v"])
        self.assertEqual(plain, [f"{names['_Z4stepv']}: 13 instructions, same instructions",
                                 f"{names['_Z5otherv']}: 2 instructions, differs (2 instructions there)",
                                 f"{names['_Z5step2v']}: 13 instructions, not in the other listing"])
        self.assertEqual(renamed, [f"{names['_Z5step2v']}: 13 instructions, same instructions"])


if __name__ == "__main__":
    unittest.main()
