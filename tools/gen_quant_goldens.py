#!/usr/bin/env python3
"""Writes tests/data/quant/goldens.bin: block bytes and their float values, computed by
the PyPI `gguf` package's numpy codecs, an implementation independent of zinc's.

  pip install numpy gguf && python3 tools/gen_quant_goldens.py

Two kinds of records:
  dequantize: random block bytes (with sane scale fields) -> gguf.quants.dequantize
  quantize:   random gaussian floats -> gguf.quants.quantize (for the formats whose
              reference quantizer zinc reproduces exactly: Q4_0..Q8_0, BF16, F16)

File layout (little endian): magic b"ZQG1", u32 record count, then per record
  u32 kind (0 dequantize, 1 quantize), u32 GGML type id, u32 n_elems, u32 n_bytes,
  n_bytes block bytes, n_elems float32 values.
"""

import argparse
import pathlib
import struct

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

# Byte offsets of the fp16 scale fields in each block, which random bytes would turn
# into NaN/inf or absurd magnitudes.
HALF_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.IQ4_NL: [0], T.IQ4_XS: [0],
}
BLOCKS_PER_TYPE = 4


def random_halves(rng, count):
    """fp16 values of random sign with magnitudes spread over 2^-14 .. 2^2."""
    mags = np.exp2(rng.uniform(-14, 2, count)).astype(np.float32)
    signs = np.where(rng.random(count) < 0.25, -1, 1).astype(np.float32)
    return (mags * signs).astype(np.float16)


def random_blocks(rng, qtype):
    block_elems, block_bytes = quants.GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, (BLOCKS_PER_TYPE, block_bytes), dtype=np.uint8)
    for off in HALF_FIELDS.get(qtype, []):
        blocks[:, off:off + 2] = random_halves(rng, BLOCKS_PER_TYPE).view(np.uint8).reshape(-1, 2)
    if qtype == T.MXFP4:
        # The exponent's extremes (subnormal scales, 2^127) plus random ones.
        blocks[:, 0] = [0, 1, 127, 255]
        extra = rng.integers(0, 256, (BLOCKS_PER_TYPE, block_bytes), dtype=np.uint8)
        extra[:, 0] = [2, 126, 128, 254]
        blocks = np.concatenate([blocks, extra])
    return blocks, block_elems


def special_halves():
    """Every class of fp16 value except NaN (whose payload numpy may not keep)."""
    bits = [0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x7bff, 0xfbff,
            0x7c00, 0xfc00, 0x3555, 0x0200]
    return np.array(bits, dtype=np.uint16)


def dequantize_records(rng):
    records = []
    for qtype in [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K,
                  T.Q6_K, T.IQ4_NL, T.IQ4_XS, T.MXFP4]:
        blocks, block_elems = random_blocks(rng, qtype)
        with np.errstate(over="ignore"):  # MXFP4 with e = 255 overflows to inf, as in GGML
            values = quants.dequantize(blocks, qtype).astype(np.float32).reshape(-1)
        assert values.size == blocks.shape[0] * block_elems
        records.append((0, qtype, blocks.tobytes(), values))
    halves = np.concatenate([special_halves(), rng.integers(0, 0x7c00, 50, dtype=np.uint16)])
    records.append((0, T.F16, halves.tobytes(), quants.dequantize(halves.view(np.uint8), T.F16).reshape(-1)))
    bf = rng.integers(0, 0x10000, 64, dtype=np.uint16)
    bf = bf[(bf & 0x7f80) != 0x7f80]  # no NaN / inf: compare finite values bit for bit
    records.append((0, T.BF16, bf.tobytes(), quants.dequantize(bf.view(np.uint8), T.BF16).reshape(-1)))
    return records


def quantize_records(rng):
    records = []
    for qtype in [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.BF16, T.F16]:
        values = (rng.standard_normal(8 * 32) * 0.05).astype(np.float32)
        values[:32] += 0.1  # one block with an offset, for the min of Q4_1 / Q5_1
        data = quants.quantize(values, qtype).view(np.uint8).reshape(-1)
        records.append((1, qtype, data.tobytes(), values))
    return records


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = pathlib.Path(__file__).resolve().parent.parent
    parser.add_argument("--out", default=root / "tests/data/quant/goldens.bin", type=pathlib.Path)
    args = parser.parse_args()

    rng = np.random.default_rng(20260807)
    records = dequantize_records(rng) + quantize_records(rng)
    out = bytearray(b"ZQG1" + struct.pack("<I", len(records)))
    for kind, qtype, data, values in records:
        values = np.ascontiguousarray(values, dtype="<f4")
        out += struct.pack("<IIII", kind, int(qtype), values.size, len(data))
        out += data + values.tobytes()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(bytes(out))
    print(f"wrote {len(records)} records, {len(out)} bytes to {args.out}")


if __name__ == "__main__":
    main()
