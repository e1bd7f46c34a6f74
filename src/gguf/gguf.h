// GGUF v2/v3: a memory-mapped, zero-copy reader and a writer.
//
// The reader validates everything it touches (lengths, offsets, alignment, dims,
// types) and reports the first problem as a GgufError whose what() is one line a
// user can act on. Tensor data is never copied: TensorInfo::data points into the map.
//
// Arrays of arrays are parsed and bounds-checked but only their length is kept:
// no model zinc runs uses them, and the element accessors say so when asked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "quant/types.h"

namespace zinc::gguf {

class GgufError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
std::string_view value_type_name(ValueType t);

// One metadata value. Scalars are held by value; strings and arrays refer into the
// mapped file (or into the writer's storage), so a Value must not outlive its file.
class Value {
 public:
  ValueType type() const { return type_; }
  bool is_array() const { return type_ == ValueType::ARRAY; }
  bool is_integer() const;  // any of the 8 integer types (not BOOL)
  bool is_float() const;    // F32 or F64

  // Scalar accessors; each throws GgufError naming the key when the type is wrong.
  int64_t as_int() const;          // any integer type that fits in int64
  uint64_t as_uint() const;        // any non-negative integer
  double as_float() const;         // F32/F64 (and integers, converted)
  bool as_bool() const;
  std::string_view as_string() const;

  // Arrays. Element accessors throw GgufError for a wrong element type or an index
  // past the end; array_float also converts integer elements.
  ValueType array_type() const;    // throws if not an array
  size_t array_size() const;       // throws if not an array
  int64_t array_int(size_t i) const;
  double array_float(size_t i) const;
  std::string_view array_string(size_t i) const;

  // Human-readable short rendering for `zinc inspect` (arrays abbreviated).
  std::string to_display(size_t max_items = 8) const;

 private:
  friend class GgufFile;
  friend struct Parser;
  [[noreturn]] void type_error(std::string_view expected) const;
  void check_index(size_t i) const;
  uint64_t element_bits(size_t i) const;  // raw bits of fixed-size element i
  std::string key_;
  ValueType type_ = ValueType::U8;
  uint64_t u_ = 0;  // raw bits of integer / bool scalars
  double f_ = 0;
  std::string_view str_;
  ValueType arr_type_ = ValueType::U8;
  uint64_t arr_n_ = 0;
  const uint8_t* arr_data_ = nullptr;                 // fixed-size element arrays
  std::vector<std::string_view> arr_strings_;         // string arrays
};

struct TensorInfo {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> dims;  // GGML order: dims[0] is the innermost (row length)
  uint64_t offset = 0;        // relative to the start of the data section
  size_t nbytes = 0;
  const uint8_t* data = nullptr;

  int64_t n_elements() const;
  int64_t dim(size_t i) const { return i < dims.size() ? dims[i] : 1; }
  int64_t rows() const { return n_elements() / dim(0); }
};

class GgufFile {
 public:
  // Maps and validates a file. Throws GgufError("FILE: what is wrong").
  static std::unique_ptr<GgufFile> open(const std::string& path);
  // Parses a buffer that the caller keeps alive (tests, fuzzing).
  static std::unique_ptr<GgufFile> from_memory(std::span<const uint8_t> bytes, std::string name = "<memory>");
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }
  size_t file_size() const { return size_; }

  const std::vector<Value>& metadata() const { return kv_; }
  const std::string& key_of(const Value& v) const { return v.key_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed accessors: throw GgufError("missing key K" / "key K is STRING, expected an integer").
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  std::string get_string(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  std::vector<double> get_float_array(std::string_view key) const;
  std::vector<std::string_view> get_string_array(std::string_view key) const;
  // ...with a default when the key is absent (a present key of the wrong type still throws).
  int64_t get_int_or(std::string_view key, int64_t def) const;
  double get_float_or(std::string_view key, double def) const;
  bool get_bool_or(std::string_view key, bool def) const;
  std::string get_string_or(std::string_view key, std::string_view def) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  const TensorInfo& tensor(std::string_view name) const;  // throws "missing tensor NAME"

  // The architecture (general.architecture), or throws.
  std::string architecture() const { return get_string("general.architecture"); }

 private:
  GgufFile() = default;
  friend struct Parser;
  std::string path_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  size_t data_offset_ = 0;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;  // non-null when we own an mmap
  std::vector<Value> kv_;
  std::vector<TensorInfo> tensors_;
  // Keys and names as views into the mapped bytes, which outlive both maps.
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
  const Value& require(std::string_view key) const;
};

// Writes GGUF v3. Metadata keeps insertion order. Tensor data is produced by a
// callback so multi-gigabyte files are written without holding them in memory: the
// file is sized up front, mapped, and tensors are filled in parallel.
// Setting a key again replaces its value in place. Misuse (bad dims, a duplicate
// tensor name, an alignment that is not a power of two) throws GgufError.
class GgufWriter {
 public:
  void set_u8(std::string key, uint8_t v);
  void set_i8(std::string key, int8_t v);
  void set_u16(std::string key, uint16_t v);
  void set_i16(std::string key, int16_t v);
  void set_u32(std::string key, uint32_t v);
  void set_i32(std::string key, int32_t v);
  void set_u64(std::string key, uint64_t v);
  void set_i64(std::string key, int64_t v);
  void set_f32(std::string key, float v);
  void set_f64(std::string key, double v);
  void set_bool(std::string key, bool v);
  void set_string(std::string key, std::string v);
  void set_u8_array(std::string key, std::vector<uint8_t> v);
  void set_i32_array(std::string key, std::vector<int32_t> v);
  void set_i64_array(std::string key, std::vector<int64_t> v);
  void set_f32_array(std::string key, std::vector<float> v);
  void set_f64_array(std::string key, std::vector<double> v);
  void set_string_array(std::string key, std::vector<std::string> v);
  void set_alignment(uint32_t a);  // also writes general.alignment

  // Registers a tensor; returns its index. dims in GGML order.
  size_t add_tensor(std::string name, DType type, std::vector<int64_t> dims);
  size_t tensor_count() const;
  size_t tensor_bytes(size_t index) const;
  uint64_t total_bytes() const;  // whole file size once written

  // fill(index, dst) writes exactly tensor_bytes(index) bytes to dst.
  using FillFn = std::function<void(size_t index, uint8_t* dst)>;
  void write_file(const std::string& path, const FillFn& fill, int n_threads = 1) const;
  std::vector<uint8_t> write_memory(const FillFn& fill) const;

 private:
  struct Kv;
  struct Tensor;
  std::vector<std::shared_ptr<Kv>> kv_;
  std::vector<std::shared_ptr<Tensor>> tensors_;
  uint32_t alignment_ = 32;
  void put_kv(std::string key, ValueType type, std::vector<uint8_t> payload);
  void put_array(std::string key, ValueType elem, const void* data, size_t n, size_t elem_size);
  std::vector<uint8_t> header() const;
  std::vector<uint64_t> offsets() const;
};

}  // namespace zinc::gguf
