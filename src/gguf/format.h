// Facts about the GGUF byte layout shared by the reader, the writer and Value:
// the magic, the default alignment, and the on-disk size of each value type.
// Internal to src/gguf.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/gguf.h"

namespace zinc::gguf::format {

// "GGUF" read as a little-endian u32.
inline constexpr uint32_t kMagic = 0x46554747;
inline constexpr uint32_t kVersion = 3;
inline constexpr size_t kDefaultAlignment = 32;

inline bool is_known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::F64); }

// Bytes of one element of a fixed-size type; 0 for STRING and ARRAY.
inline size_t fixed_size(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::BOOL: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    case ValueType::STRING: case ValueType::ARRAY: return 0;
  }
  return 0;
}

inline bool is_integer_type(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::U16: case ValueType::I16:
    case ValueType::U32: case ValueType::I32: case ValueType::U64: case ValueType::I64:
      return true;
    default:
      return false;
  }
}

inline bool is_signed_type(ValueType t) {
  return t == ValueType::I8 || t == ValueType::I16 || t == ValueType::I32 || t == ValueType::I64;
}

// Little-endian integer bits as read from the file, sign-extended for the signed
// types so that every integer is held as its two's-complement uint64.
inline uint64_t sign_extend(ValueType t, uint64_t bits) {
  switch (t) {
    case ValueType::I8: return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int8_t>(bits)));
    case ValueType::I16: return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int16_t>(bits)));
    case ValueType::I32: return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(bits)));
    default: return bits;
  }
}

inline uint64_t align_up(uint64_t x, uint64_t alignment) { return (x + alignment - 1) / alignment * alignment; }

}  // namespace zinc::gguf::format
