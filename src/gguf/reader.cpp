// GgufFile: maps a GGUF v2/v3 file read-only and validates every byte it relies
// on before handing out metadata and tensor views. Every check fails with one
// GgufError line that starts with the file name; no input, however corrupt, makes
// the parser allocate more than a small multiple of the file's size.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>

#include "gguf/format.h"
#include "gguf/gguf.h"

namespace zinc::gguf {

static_assert(std::endian::native == std::endian::little, "zinc reads GGUF fields in place: little-endian hosts only");

namespace {

constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayNesting = 16;
// Smallest encodings, used to reject absurd counts before looping over them.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;              // key length, 1-byte key, type, u8 value
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;  // name, n_dims, one dim, type, offset
constexpr uint64_t kMinStringBytes = 8;
constexpr uint64_t kMinArrayBytes = 4 + 8;

bool checked_mul(uint64_t a, uint64_t b, uint64_t& out) { return !__builtin_mul_overflow(a, b, &out); }

std::string printable_magic(const uint8_t* p) {
  std::string s;
  for (int i = 0; i < 4; ++i) s += (p[i] >= 0x20 && p[i] < 0x7f) ? static_cast<char>(p[i]) : '?';
  return s;
}

// A key or tensor name as it can appear in a one-line message: control bytes
// escaped, very long names cut.
std::string shown(std::string_view name) {
  constexpr size_t kMaxShown = 96;
  std::string out;
  for (size_t i = 0; i < name.size() && i < kMaxShown; ++i) {
    unsigned char c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (name.size() > kMaxShown) out += "...";
  return out;
}

// Runs an accessor and prefixes the file name to the error it throws.
template <class F>
auto in_file(const std::string& path, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const GgufError& e) {
    throw GgufError(path + ": " + e.what());
  }
}

}  // namespace

struct Parser {
  GgufFile& file;
  const uint8_t* base;
  size_t size;
  size_t pos = 0;
  std::string context;  // "in key K" / "in tensor N": where the cursor is, for errors

  explicit Parser(GgufFile& f) : file(f), base(f.base_), size(f.size_) {}

  [[noreturn]] void fail(const std::string& what) const { throw GgufError(file.path_ + ": " + what); }

  size_t remaining() const { return size - pos; }

  void need(uint64_t n, const char* what) const {
    if (n > remaining())
      fail("truncated " + context + ": " + what + " at byte " + std::to_string(pos) + " needs " + std::to_string(n) +
           " bytes but the file ends at byte " + std::to_string(size));
  }

  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, base + pos, sizeof v);
    pos += sizeof v;
    return v;
  }

  std::string_view read_string(const char* what) {
    uint64_t n = read<uint64_t>(what);
    need(n, what);
    std::string_view s(reinterpret_cast<const char*>(base + pos), n);
    pos += n;
    return s;
  }

  ValueType read_value_type(const char* what) {
    uint32_t t = read<uint32_t>(what);
    if (!format::is_known_value_type(t)) fail("unknown value type " + std::to_string(t) + " " + context);
    return static_cast<ValueType>(t);
  }

  void parse() {
    if (size < 4) fail("too small to be a GGUF file (" + std::to_string(size) + " bytes)");
    context = "header";
    if (read<uint32_t>("magic") != format::kMagic)
      fail("not a GGUF file (magic \"" + printable_magic(base) + "\", expected \"GGUF\")");
    uint32_t version = read<uint32_t>("version");
    if (version == 1) fail("GGUF version 1 is not supported (zinc reads versions 2 and 3); re-convert the model");
    if (version == 0x02000000 || version == 0x03000000) fail("big-endian GGUF files are not supported");
    if (version != 2 && version != 3) fail("unknown GGUF version " + std::to_string(version) + " (zinc reads 2 and 3)");
    file.version_ = version;
    uint64_t n_tensors = read<uint64_t>("tensor count");
    uint64_t n_kv = read<uint64_t>("metadata key count");
    if (n_tensors > remaining() / kMinTensorInfoBytes)
      fail("header claims " + std::to_string(n_tensors) + " tensors, more than a " + std::to_string(size) +
           "-byte file can describe");
    if (n_kv > remaining() / kMinKvBytes)
      fail("header claims " + std::to_string(n_kv) + " metadata keys, more than a " + std::to_string(size) +
           "-byte file can hold");

    for (uint64_t i = 0; i < n_kv; ++i) read_kv(i);
    read_alignment();
    for (uint64_t i = 0; i < n_tensors; ++i) read_tensor_info(i);
    place_tensors();
  }

  void read_kv(uint64_t index) {
    context = "in metadata key #" + std::to_string(index);
    std::string_view key = read_string("key");
    if (key.empty()) fail("metadata key #" + std::to_string(index) + " has an empty name");
    if (file.kv_index_.count(key)) fail("duplicate metadata key " + shown(key));
    context = "in metadata key " + shown(key);
    Value v;
    v.key_ = std::string(key);
    v.type_ = read_value_type("value type");
    read_value(v);
    file.kv_index_.emplace(key, file.kv_.size());
    file.kv_.push_back(std::move(v));
  }

  void read_value(Value& v) {
    switch (v.type_) {
      case ValueType::STRING:
        v.str_ = read_string("string");
        return;
      case ValueType::ARRAY: {
        v.arr_type_ = read_value_type("array element type");
        v.arr_n_ = read<uint64_t>("array length");
        read_array_elements(v.arr_type_, v.arr_n_, &v, 1);
        return;
      }
      case ValueType::F32:
        v.f_ = read<float>("f32 value");
        return;
      case ValueType::F64:
        v.f_ = read<double>("f64 value");
        return;
      default: {
        size_t n = format::fixed_size(v.type_);
        need(n, "value");
        uint64_t bits = 0;
        std::memcpy(&bits, base + pos, n);
        pos += n;
        v.u_ = format::sign_extend(v.type_, bits);
      }
    }
  }

  // Walks n elements of an array; `into` keeps them (top level) or is null (nested
  // arrays, which are only bounds-checked). Each count is checked against the
  // bytes left before anything is looped over or allocated.
  void read_array_elements(ValueType elem, uint64_t n, Value* into, int depth) {
    const uint64_t min_bytes = elem == ValueType::STRING  ? kMinStringBytes
                               : elem == ValueType::ARRAY ? kMinArrayBytes
                                                          : format::fixed_size(elem);
    if (n > remaining() / min_bytes)
      fail("truncated " + context + ": an array of " + std::to_string(n) + " " + std::string(value_type_name(elem)) +
           " elements at byte " + std::to_string(pos) + " runs past the end of the file (" + std::to_string(size) +
           " bytes)");
    if (elem == ValueType::STRING) {
      // Capped: a corrupt count must not reserve memory the strings never fill.
      if (into) into->arr_strings_.reserve(static_cast<size_t>(std::min<uint64_t>(n, uint64_t{1} << 20)));
      for (uint64_t i = 0; i < n; ++i) {
        std::string_view s = read_string("array string");
        if (into) into->arr_strings_.push_back(s);
      }
    } else if (elem == ValueType::ARRAY) {
      if (depth >= kMaxArrayNesting)
        fail("arrays nested more than " + std::to_string(kMaxArrayNesting) + " deep " + context);
      if (into) into->arr_data_ = base + pos;
      for (uint64_t i = 0; i < n; ++i) {
        ValueType inner = read_value_type("nested array element type");
        uint64_t inner_n = read<uint64_t>("nested array length");
        read_array_elements(inner, inner_n, nullptr, depth + 1);
      }
    } else {
      if (into) into->arr_data_ = base + pos;
      pos += n * min_bytes;
    }
  }

  void read_alignment() {
    context = "in general.alignment";
    const Value* v = file.find("general.alignment");
    if (!v) return;
    if (!v->is_integer())
      fail("general.alignment is " + std::string(value_type_name(v->type())) + ", expected an unsigned integer");
    int64_t a = static_cast<int64_t>(v->u_);
    if (a <= 0 || a > std::numeric_limits<uint32_t>::max() || !std::has_single_bit(static_cast<uint64_t>(a)))
      fail("general.alignment is " + std::to_string(a) + ", expected a power of two");
    file.alignment_ = static_cast<size_t>(a);
  }

  void read_tensor_info(uint64_t index) {
    context = "in tensor info #" + std::to_string(index);
    std::string_view name = read_string("tensor name");
    if (name.empty()) fail("tensor #" + std::to_string(index) + " has an empty name");
    std::string name_s = shown(name);  // for messages
    if (file.tensor_index_.count(name)) fail("duplicate tensor name " + name_s);
    context = "in tensor info " + name_s;
    TensorInfo t;
    t.name = std::string(name);
    uint32_t n_dims = read<uint32_t>("dimension count");
    if (n_dims == 0 || n_dims > kMaxDims)
      fail("tensor " + name_s + " has " + std::to_string(n_dims) + " dimensions (expected 1 to 4)");
    uint64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = read<uint64_t>("dimension");
      if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail("tensor " + name_s + " has dimension " + std::to_string(d) + " = " +
             std::to_string(static_cast<int64_t>(dim)) + " (expected a positive size)");
      if (!checked_mul(n_elements, dim, n_elements) ||
          n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail("tensor " + name_s + " has dimensions whose product overflows int64");
      t.dims.push_back(static_cast<int64_t>(dim));
    }
    uint32_t type_id = read<uint32_t>("tensor type");
    std::optional<TypeTraits> traits = find_type_traits(type_id);
    if (!traits) fail("tensor " + name_s + " has unknown type id " + std::to_string(type_id));
    t.type = traits->type;
    if (t.dims[0] % traits->block_elems != 0)
      fail("tensor " + name_s + " (" + std::string(traits->name) + ") has rows of " + std::to_string(t.dims[0]) +
           " elements, not a multiple of the block size " + std::to_string(traits->block_elems));
    uint64_t nbytes = 0;
    if (!checked_mul(n_elements / static_cast<uint64_t>(traits->block_elems), traits->block_bytes, nbytes) ||
        nbytes > std::numeric_limits<size_t>::max())
      fail("tensor " + name_s + " is too large for a byte count");
    t.nbytes = static_cast<size_t>(nbytes);
    t.offset = read<uint64_t>("tensor data offset");
    if (t.offset % file.alignment_ != 0)
      fail("tensor " + name_s + " has data offset " + std::to_string(t.offset) + ", not a multiple of the alignment " +
           std::to_string(file.alignment_));
    file.tensor_index_.emplace(name, file.tensors_.size());
    file.tensors_.push_back(std::move(t));
  }

  // Checks the data section against the file size and the tensors against each
  // other, then points each tensor at its bytes.
  void place_tensors() {
    file.data_offset_ = format::align_up(pos, file.alignment_);
    if (file.tensors_.empty()) return;
    if (file.data_offset_ > size)
      fail("truncated: the tensor data section would start at byte " + std::to_string(file.data_offset_) +
           " but the file ends at byte " + std::to_string(size));
    const uint64_t data_bytes = size - file.data_offset_;
    for (TensorInfo& t : file.tensors_) {
      if (t.offset > data_bytes || t.nbytes > data_bytes - t.offset)
        fail("truncated: tensor " + shown(t.name) + " needs bytes " + std::to_string(t.offset) + ".." +
             std::to_string(t.offset + static_cast<uint64_t>(t.nbytes)) + " of the data section, which has " +
             std::to_string(data_bytes));
      t.data = base + file.data_offset_ + t.offset;
    }
    std::vector<size_t> order(file.tensors_.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return file.tensors_[a].offset < file.tensors_[b].offset; });
    for (size_t i = 1; i < order.size(); ++i) {
      const TensorInfo& prev = file.tensors_[order[i - 1]];
      const TensorInfo& cur = file.tensors_[order[i]];
      if (prev.offset + prev.nbytes > cur.offset)
        fail("tensors " + shown(prev.name) + " and " + shown(cur.name) + " overlap in the data section (at offset " +
             std::to_string(cur.offset) + ")");
    }
  }
};

// ---- GgufFile ------------------------------------------------------------------

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw GgufError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw GgufError(path + ": not a regular file");
  }
  if (st.st_size == 0) {
    ::close(fd);
    throw GgufError(path + ": empty file, not a GGUF model");
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_errno = errno;
  ::close(fd);
  if (map == MAP_FAILED) throw GgufError(path + ": cannot map: " + std::strerror(map_errno));
  std::unique_ptr<GgufFile> file(new GgufFile);
  file->path_ = path;
  file->map_ = map;
  file->base_ = static_cast<const uint8_t*>(map);
  file->size_ = size;
  Parser(*file).parse();
  return file;
}

std::unique_ptr<GgufFile> GgufFile::from_memory(std::span<const uint8_t> bytes, std::string name) {
  std::unique_ptr<GgufFile> file(new GgufFile);
  file->path_ = std::move(name);
  file->base_ = bytes.data();
  file->size_ = bytes.size();
  Parser(*file).parse();
  return file;
}

GgufFile::~GgufFile() {
  if (map_) ::munmap(map_, size_);
}

const Value* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second];
}

const Value& GgufFile::require(std::string_view key) const {
  const Value* v = find(key);
  if (!v) throw GgufError("missing key " + std::string(key));  // in_file adds the path
  return *v;
}

int64_t GgufFile::get_int(std::string_view key) const {
  return in_file(path_, [&] { return require(key).as_int(); });
}

double GgufFile::get_float(std::string_view key) const {
  return in_file(path_, [&] { return require(key).as_float(); });
}

bool GgufFile::get_bool(std::string_view key) const {
  return in_file(path_, [&] { return require(key).as_bool(); });
}

std::string GgufFile::get_string(std::string_view key) const {
  return in_file(path_, [&] { return std::string(require(key).as_string()); });
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  return in_file(path_, [&] {
    const Value& v = require(key);
    if (!format::is_integer_type(v.array_type())) v.type_error("an array of integers");
    std::vector<int64_t> out(v.array_size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = v.array_int(i);
    return out;
  });
}

std::vector<double> GgufFile::get_float_array(std::string_view key) const {
  return in_file(path_, [&] {
    const Value& v = require(key);
    ValueType t = v.array_type();
    if (!format::is_integer_type(t) && t != ValueType::F32 && t != ValueType::F64) v.type_error("an array of numbers");
    std::vector<double> out(v.array_size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = v.array_float(i);
    return out;
  });
}

std::vector<std::string_view> GgufFile::get_string_array(std::string_view key) const {
  return in_file(path_, [&] {
    const Value& v = require(key);
    if (v.array_type() != ValueType::STRING) v.type_error("an array of strings");
    return v.arr_strings_;
  });
}

int64_t GgufFile::get_int_or(std::string_view key, int64_t def) const { return has(key) ? get_int(key) : def; }
double GgufFile::get_float_or(std::string_view key, double def) const { return has(key) ? get_float(key) : def; }
bool GgufFile::get_bool_or(std::string_view key, bool def) const { return has(key) ? get_bool(key) : def; }
std::string GgufFile::get_string_or(std::string_view key, std::string_view def) const {
  return has(key) ? get_string(key) : std::string(def);
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& GgufFile::tensor(std::string_view name) const {
  const TensorInfo* t = find_tensor(name);
  if (!t) throw GgufError(path_ + ": missing tensor " + std::string(name));
  return *t;
}

}  // namespace zinc::gguf
