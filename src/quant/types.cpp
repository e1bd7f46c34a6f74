#include "quant/types.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <stdexcept>
#include <string>

#include "quant/blocks.h"

namespace zinc {
namespace {

// Block layouts; blocks.h has the structs, checked against this table below.
constexpr std::array<TypeTraits, 23> kTypes = {{
    {DType::F32, "f32", 1, 4, false},
    {DType::F16, "f16", 1, 2, false},
    {DType::BF16, "bf16", 1, 2, false},
    {DType::F64, "f64", 1, 8, false},
    {DType::I8, "i8", 1, 1, false},
    {DType::I16, "i16", 1, 2, false},
    {DType::I32, "i32", 1, 4, false},
    {DType::I64, "i64", 1, 8, false},
    {DType::Q4_0, "q4_0", 32, 18, true},
    {DType::Q4_1, "q4_1", 32, 20, true},
    {DType::Q5_0, "q5_0", 32, 22, true},
    {DType::Q5_1, "q5_1", 32, 24, true},
    {DType::Q8_0, "q8_0", 32, 34, true},
    {DType::Q8_1, "q8_1", 32, 36, true},
    {DType::Q2_K, "q2_K", 256, 84, true},
    {DType::Q3_K, "q3_K", 256, 110, true},
    {DType::Q4_K, "q4_K", 256, 144, true},
    {DType::Q5_K, "q5_K", 256, 176, true},
    {DType::Q6_K, "q6_K", 256, 210, true},
    {DType::Q8_K, "q8_K", 256, 292, true},
    {DType::IQ4_NL, "iq4_nl", 32, 18, true},
    {DType::IQ4_XS, "iq4_xs", 256, 136, true},
    {DType::MXFP4, "mxfp4", 32, 17, true},
}};

constexpr const TypeTraits& traits_of(DType t) {
  for (const auto& tt : kTypes)
    if (tt.type == t) return tt;
  return kTypes[0];  // unreachable for the enumerators; a compile error inside a static_assert
}

template <typename Block>
constexpr bool block_matches(DType t, int64_t elems) {
  return traits_of(t).type == t && traits_of(t).block_bytes == sizeof(Block) && traits_of(t).block_elems == elems;
}

static_assert(block_matches<BlockQ4_0>(DType::Q4_0, kBlock32));
static_assert(block_matches<BlockQ4_1>(DType::Q4_1, kBlock32));
static_assert(block_matches<BlockQ5_0>(DType::Q5_0, kBlock32));
static_assert(block_matches<BlockQ5_1>(DType::Q5_1, kBlock32));
static_assert(block_matches<BlockQ8_0>(DType::Q8_0, kBlock32));
static_assert(block_matches<BlockQ8_1>(DType::Q8_1, kBlock32));
static_assert(block_matches<BlockQ2_K>(DType::Q2_K, kBlockK));
static_assert(block_matches<BlockQ3_K>(DType::Q3_K, kBlockK));
static_assert(block_matches<BlockQ4_K>(DType::Q4_K, kBlockK));
static_assert(block_matches<BlockQ5_K>(DType::Q5_K, kBlockK));
static_assert(block_matches<BlockQ6_K>(DType::Q6_K, kBlockK));
static_assert(block_matches<BlockQ8_K>(DType::Q8_K, kBlockK));
static_assert(block_matches<BlockIQ4_NL>(DType::IQ4_NL, kBlock32));
static_assert(block_matches<BlockIQ4_XS>(DType::IQ4_XS, kBlockK));
static_assert(block_matches<BlockMXFP4>(DType::MXFP4, kBlock32));

}  // namespace

std::optional<TypeTraits> find_type_traits(uint32_t type_id) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == type_id) return t;
  return std::nullopt;
}

const TypeTraits& type_traits(DType t) {
  for (const auto& tt : kTypes)
    if (tt.type == t) return tt;
  throw std::logic_error("type_traits: DType " + std::to_string(static_cast<uint32_t>(t)) + " missing from the table");
}

std::string_view type_name(DType t) { return type_traits(t).name; }

std::optional<DType> type_from_name(std::string_view name) {
  auto lower = [](std::string_view s) {
    std::string r(s);
    std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return std::tolower(c); });
    return r;
  };
  std::string want = lower(name);
  for (const auto& t : kTypes)
    if (lower(t.name) == want) return t.type;
  return std::nullopt;
}

size_t row_bytes(DType t, int64_t n) {
  const TypeTraits& tt = type_traits(t);
  if (n < 0 || n % tt.block_elems != 0)
    throw std::invalid_argument("row of " + std::to_string(n) + " elements is not a whole number of " +
                                std::string(tt.name) + " blocks");
  return static_cast<size_t>(n / tt.block_elems) * tt.block_bytes;
}

}  // namespace zinc
