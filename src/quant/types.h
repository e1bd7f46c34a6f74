// The table of tensor element types zinc knows: GGML's type ids, block sizes and
// bytes per block. Every size computation in zinc goes through type_traits(); no
// other file hard-codes a block size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace zinc {

// Values are GGML's on-disk type ids (ggml_type); GGUF stores them verbatim.
enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ4_NL = 20,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
  MXFP4 = 39,
};

struct TypeTraits {
  DType type;
  std::string_view name;    // "q4_K", as GGML spells it
  int64_t block_elems;      // elements per block (1 for plain types)
  size_t block_bytes;       // bytes per block
  bool quantized;
};

// nullopt for a type id zinc does not know (a GGUF with one is rejected).
std::optional<TypeTraits> find_type_traits(uint32_t type_id);
// For a DType that is in the table (every enumerator is).
const TypeTraits& type_traits(DType t);
std::string_view type_name(DType t);
// Case-insensitive lookup by GGML name ("Q4_K", "f16", ...).
std::optional<DType> type_from_name(std::string_view name);

// Bytes of one row of n elements; n must be a multiple of the block size.
size_t row_bytes(DType t, int64_t n);
inline bool row_fits_blocks(DType t, int64_t n) { return n % type_traits(t).block_elems == 0; }

}  // namespace zinc
