// zinc's codecs against goldens written by gguf-py's numpy codecs
// (tools/gen_quant_goldens.py): dequantization bit for bit on random blocks of every
// format gguf-py implements, and the GGML reference quantizers byte for byte.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>
#include <vector>

#include "quant/quant.h"
#include "test_util.h"

namespace zinc {
namespace {

struct GoldenRecord {
  uint32_t kind;  // 0: bytes -> values, 1: values -> bytes
  DType type;
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};

std::vector<GoldenRecord> read_goldens() {
  const std::string path = test::source_dir() + "/tests/data/quant/goldens.bin";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t pos = 0;
  auto take = [&](void* dst, size_t n) {
    if (pos + n > data.size()) throw std::runtime_error("truncated golden file");
    std::memcpy(dst, data.data() + pos, n);
    pos += n;
  };
  char magic[4];
  take(magic, 4);
  if (std::memcmp(magic, "ZQG1", 4) != 0) throw std::runtime_error("bad golden magic");
  uint32_t count;
  take(&count, 4);
  std::vector<GoldenRecord> records(count);
  for (auto& r : records) {
    uint32_t header[4];
    take(header, sizeof header);
    r.kind = header[0];
    r.type = static_cast<DType>(header[1]);
    r.values.resize(header[2]);
    r.bytes.resize(header[3]);
    take(r.bytes.data(), r.bytes.size());
    take(r.values.data(), r.values.size() * sizeof(float));
  }
  if (pos != data.size()) throw std::runtime_error("trailing bytes in golden file");
  return records;
}

TEST(QuantGolden, DequantizeMatchesGgufPyBitForBit) {
  std::set<DType> seen;
  for (const auto& r : read_goldens()) {
    if (r.kind != 0) continue;
    const auto n = static_cast<int64_t>(r.values.size());
    ASSERT_EQ(row_bytes(r.type, n), r.bytes.size()) << type_name(r.type);
    std::vector<float> got(r.values.size(), NAN);
    dequantize_row(r.type, r.bytes.data(), got.data(), n);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(r.values[i]))
          << type_name(r.type) << " element " << i << ": " << got[i] << " vs " << r.values[i];
    seen.insert(r.type);
  }
  // Every quantized type in the table except the two gguf-py lacks (Q8_1, Q8_K: see
  // dequantize_test.cpp), plus the half types.
  const std::set<DType> expected = {DType::Q4_0, DType::Q4_1,   DType::Q5_0,   DType::Q5_1,  DType::Q8_0,
                                    DType::Q2_K, DType::Q3_K,   DType::Q4_K,   DType::Q5_K,  DType::Q6_K,
                                    DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4, DType::F16, DType::BF16};
  EXPECT_EQ(seen, expected);
}

TEST(QuantGolden, ReferenceQuantizersMatchGgufPyByteForByte) {
  std::set<DType> seen;
  for (const auto& r : read_goldens()) {
    if (r.kind != 1) continue;
    const auto n = static_cast<int64_t>(r.values.size());
    ASSERT_TRUE(can_quantize(r.type)) << type_name(r.type);
    std::vector<uint8_t> got(row_bytes(r.type, n), 0xcd);
    quantize_row(r.type, r.values.data(), got.data(), n);
    EXPECT_EQ(got, r.bytes) << type_name(r.type);
    seen.insert(r.type);
  }
  EXPECT_EQ(seen.size(), 7u);
}

}  // namespace
}  // namespace zinc
