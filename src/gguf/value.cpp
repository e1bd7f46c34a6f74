// Value: typed access to one GGUF metadata value, and its short display form.
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "gguf/format.h"
#include "gguf/gguf.h"

namespace zinc::gguf {
namespace {

double float_from_bits(ValueType t, uint64_t bits) {
  if (t == ValueType::F32) return std::bit_cast<float>(static_cast<uint32_t>(bits));
  return std::bit_cast<double>(bits);
}

// The value of integer bits of type t as a double (exact up to 2^53).
double integer_as_double(ValueType t, uint64_t bits) {
  return t == ValueType::U64 ? static_cast<double>(bits) : static_cast<double>(static_cast<int64_t>(bits));
}

int64_t integer_as_int64(const std::string& key, ValueType t, uint64_t bits) {
  if (t == ValueType::U64 && bits > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw GgufError("key " + key + " holds " + std::to_string(bits) + ", too large for int64");
  return static_cast<int64_t>(bits);
}

// The shortest decimal that reads back as the same value of type t, so an f32
// 1e-5 shows as 1e-05 rather than 9.99999975e-06.
std::string format_float(ValueType t, double f) {
  char buf[64];
  const int max_digits = t == ValueType::F32 ? 9 : 17;
  for (int digits = 6; digits <= max_digits; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, f);
    double back = std::strtod(buf, nullptr);
    if (t == ValueType::F32 ? static_cast<float>(back) == static_cast<float>(f) : back == f) break;
  }
  return buf;
}

// A string shown on one line: control characters escaped, long ones cut short.
std::string quote(std::string_view s, size_t max_chars) {
  std::string out = "\"";
  size_t shown = 0;
  for (char c : s) {
    if (shown++ == max_chars) {
      out += "...\" (" + std::to_string(s.size()) + " bytes)";
      return out;
    }
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string display_scalar(ValueType t, uint64_t bits) {
  if (t == ValueType::BOOL) return bits ? "true" : "false";
  if (t == ValueType::F32 || t == ValueType::F64) return format_float(t, float_from_bits(t, bits));
  if (format::is_signed_type(t)) return std::to_string(static_cast<int64_t>(bits));
  return std::to_string(bits);
}

}  // namespace

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "unknown";
}

bool Value::is_integer() const { return format::is_integer_type(type_); }
bool Value::is_float() const { return type_ == ValueType::F32 || type_ == ValueType::F64; }

void Value::type_error(std::string_view expected) const {
  std::string actual(value_type_name(type_));
  if (type_ == ValueType::ARRAY) actual = "an array of " + std::string(value_type_name(arr_type_));
  throw GgufError("key " + key_ + " is " + actual + ", expected " + std::string(expected));
}

int64_t Value::as_int() const {
  if (!is_integer()) type_error("an integer");
  return integer_as_int64(key_, type_, u_);
}

uint64_t Value::as_uint() const {
  if (!is_integer()) type_error("an integer");
  if (format::is_signed_type(type_) && static_cast<int64_t>(u_) < 0)
    throw GgufError("key " + key_ + " is " + std::to_string(static_cast<int64_t>(u_)) +
                    ", expected a non-negative integer");
  return u_;
}

double Value::as_float() const {
  if (is_float()) return f_;
  if (is_integer()) return integer_as_double(type_, u_);
  type_error("a number");
}

bool Value::as_bool() const {
  if (type_ != ValueType::BOOL) type_error("a bool");
  return u_ != 0;
}

std::string_view Value::as_string() const {
  if (type_ != ValueType::STRING) type_error("a string");
  return str_;
}

ValueType Value::array_type() const {
  if (type_ != ValueType::ARRAY) type_error("an array");
  return arr_type_;
}

size_t Value::array_size() const {
  if (type_ != ValueType::ARRAY) type_error("an array");
  return static_cast<size_t>(arr_n_);
}

void Value::check_index(size_t i) const {
  if (i >= arr_n_)
    throw GgufError("key " + key_ + ": index " + std::to_string(i) + " is past the end of its " +
                    std::to_string(arr_n_) + " items");
}

uint64_t Value::element_bits(size_t i) const {
  size_t size = format::fixed_size(arr_type_);
  uint64_t bits = 0;
  std::memcpy(&bits, arr_data_ + i * size, size);  // little-endian host: low bytes first
  return format::sign_extend(arr_type_, bits);
}

int64_t Value::array_int(size_t i) const {
  if (type_ != ValueType::ARRAY || !format::is_integer_type(arr_type_)) type_error("an array of integers");
  check_index(i);
  return integer_as_int64(key_, arr_type_, element_bits(i));
}

double Value::array_float(size_t i) const {
  if (type_ != ValueType::ARRAY) type_error("an array of numbers");
  bool is_float_array = arr_type_ == ValueType::F32 || arr_type_ == ValueType::F64;
  if (!is_float_array && !format::is_integer_type(arr_type_)) type_error("an array of numbers");
  check_index(i);
  uint64_t bits = element_bits(i);
  return is_float_array ? float_from_bits(arr_type_, bits) : integer_as_double(arr_type_, bits);
}

std::string_view Value::array_string(size_t i) const {
  if (type_ != ValueType::ARRAY || arr_type_ != ValueType::STRING) type_error("an array of strings");
  check_index(i);
  return arr_strings_[i];
}

std::string Value::to_display(size_t max_items) const {
  switch (type_) {
    case ValueType::STRING: return quote(str_, 120);
    case ValueType::F32: case ValueType::F64: return format_float(type_, f_);
    case ValueType::ARRAY: break;
    default: return display_scalar(type_, u_);
  }
  std::string out = "[";
  if (arr_type_ == ValueType::ARRAY) return out.append(std::to_string(arr_n_)).append(" arrays, not read]");
  size_t shown = arr_n_ < max_items ? static_cast<size_t>(arr_n_) : max_items;
  for (size_t i = 0; i < shown; ++i) {
    if (i) out += ", ";
    if (arr_type_ == ValueType::STRING) {
      out += quote(arr_strings_[i], 40);
    } else {
      uint64_t bits = element_bits(i);
      out += display_scalar(arr_type_, bits);
    }
  }
  if (shown < arr_n_) out += ", ...";
  out += "]";
  if (shown < arr_n_ || arr_n_ > 8) out += " (" + std::to_string(arr_n_) + " items)";
  return out;
}

}  // namespace zinc::gguf
