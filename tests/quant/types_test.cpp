// The type table: ids, names, block geometry against the block structs, row sizes.
#include <gtest/gtest.h>

#include <cctype>
#include <stdexcept>
#include <string>

#include "quant/blocks.h"
#include "quant/types.h"

namespace zinc {
namespace {

constexpr DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::F64,  DType::I8,    DType::I16,
                               DType::I32,  DType::I64,  DType::Q4_0, DType::Q4_1, DType::Q5_0,  DType::Q5_1,
                               DType::Q8_0, DType::Q8_1, DType::Q2_K, DType::Q3_K, DType::Q4_K,  DType::Q5_K,
                               DType::Q6_K, DType::Q8_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4};

TEST(QuantTypes, GgmlIdsAndNames) {
  // A few ids and names straight from GGML's ggml_type enum and type_traits names.
  EXPECT_EQ(static_cast<uint32_t>(DType::Q4_K), 12u);
  EXPECT_EQ(static_cast<uint32_t>(DType::BF16), 30u);
  EXPECT_EQ(static_cast<uint32_t>(DType::MXFP4), 39u);
  EXPECT_EQ(type_name(DType::Q6_K), "q6_K");
  EXPECT_EQ(type_name(DType::IQ4_XS), "iq4_xs");
  EXPECT_FALSE(find_type_traits(4).has_value());  // Q4_2, removed from GGML
  EXPECT_FALSE(find_type_traits(1000).has_value());
}

TEST(QuantTypes, EveryTypeRoundTripsThroughIdAndName) {
  for (DType t : kAllTypes) {
    const TypeTraits& tt = type_traits(t);
    EXPECT_EQ(tt.type, t);
    auto by_id = find_type_traits(static_cast<uint32_t>(t));
    ASSERT_TRUE(by_id.has_value());
    EXPECT_EQ(by_id->name, tt.name);
    EXPECT_EQ(type_from_name(tt.name), t);
    std::string upper(tt.name);
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_EQ(type_from_name(upper), t) << upper;
    EXPECT_EQ(tt.quantized, tt.block_elems > 1) << tt.name;
  }
  EXPECT_FALSE(type_from_name("q4_k_m").has_value());
  EXPECT_FALSE(type_from_name("").has_value());
}

TEST(QuantTypes, BlockStructsMatchTheTable) {
  auto bytes = [](DType t) { return type_traits(t).block_bytes; };
  auto elems = [](DType t) { return type_traits(t).block_elems; };
  EXPECT_EQ(sizeof(BlockQ4_0), bytes(DType::Q4_0));
  EXPECT_EQ(sizeof(BlockQ4_1), bytes(DType::Q4_1));
  EXPECT_EQ(sizeof(BlockQ5_0), bytes(DType::Q5_0));
  EXPECT_EQ(sizeof(BlockQ5_1), bytes(DType::Q5_1));
  EXPECT_EQ(sizeof(BlockQ8_0), bytes(DType::Q8_0));
  EXPECT_EQ(sizeof(BlockQ8_1), bytes(DType::Q8_1));
  EXPECT_EQ(sizeof(BlockQ2_K), bytes(DType::Q2_K));
  EXPECT_EQ(sizeof(BlockQ3_K), bytes(DType::Q3_K));
  EXPECT_EQ(sizeof(BlockQ4_K), bytes(DType::Q4_K));
  EXPECT_EQ(sizeof(BlockQ5_K), bytes(DType::Q5_K));
  EXPECT_EQ(sizeof(BlockQ6_K), bytes(DType::Q6_K));
  EXPECT_EQ(sizeof(BlockQ8_K), bytes(DType::Q8_K));
  EXPECT_EQ(sizeof(BlockIQ4_NL), bytes(DType::IQ4_NL));
  EXPECT_EQ(sizeof(BlockIQ4_XS), bytes(DType::IQ4_XS));
  EXPECT_EQ(sizeof(BlockMXFP4), bytes(DType::MXFP4));
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q8_1, DType::IQ4_NL,
                  DType::MXFP4})
    EXPECT_EQ(elems(t), 32) << type_name(t);
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K, DType::IQ4_XS})
    EXPECT_EQ(elems(t), 256) << type_name(t);
  // Bits per weight of the popular formats, as published: 4.5, 5.5, 6.5625, 8.5.
  EXPECT_DOUBLE_EQ(8.0 * bytes(DType::Q4_K) / 256, 4.5);
  EXPECT_DOUBLE_EQ(8.0 * bytes(DType::Q5_K) / 256, 5.5);
  EXPECT_DOUBLE_EQ(8.0 * bytes(DType::Q6_K) / 256, 6.5625);
  EXPECT_DOUBLE_EQ(8.0 * bytes(DType::Q8_0) / 32, 8.5);
}

TEST(QuantTypes, RowBytes) {
  EXPECT_EQ(row_bytes(DType::F32, 7), 28u);
  EXPECT_EQ(row_bytes(DType::BF16, 3), 6u);
  EXPECT_EQ(row_bytes(DType::Q8_0, 4096), 128u * 34);
  EXPECT_EQ(row_bytes(DType::Q4_K, 2048), 8u * 144);
  EXPECT_EQ(row_bytes(DType::MXFP4, 64), 34u);
  EXPECT_EQ(row_bytes(DType::Q6_K, 0), 0u);
  EXPECT_THROW(row_bytes(DType::Q4_K, 255), std::invalid_argument);
  EXPECT_THROW(row_bytes(DType::Q8_0, 33), std::invalid_argument);
  EXPECT_THROW(row_bytes(DType::F16, -1), std::invalid_argument);
  EXPECT_TRUE(row_fits_blocks(DType::Q5_K, 512));
  EXPECT_FALSE(row_fits_blocks(DType::Q5_K, 544));
}

}  // namespace
}  // namespace zinc
