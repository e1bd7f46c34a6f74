// GgufWriter: serialises metadata and tensor infos as GGUF v3 and produces the
// tensor data through a fill callback, in parallel, straight into a mapped file.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "gguf/format.h"
#include "gguf/gguf.h"

namespace zinc::gguf {

struct GgufWriter::Kv {
  std::string key;
  ValueType type;
  std::vector<uint8_t> payload;  // the encoded value, without key and type
};

struct GgufWriter::Tensor {
  std::string name;
  DType type;
  std::vector<int64_t> dims;
  size_t nbytes;
};

namespace {

template <class T>
void append(std::vector<uint8_t>& out, T v) {
  size_t at = out.size();
  out.resize(at + sizeof v);
  std::memcpy(out.data() + at, &v, sizeof v);
}

void append_string(std::vector<uint8_t>& out, std::string_view s) {
  append<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

template <class T>
std::vector<uint8_t> encode(T v) {
  std::vector<uint8_t> out;
  append(out, v);
  return out;
}

[[noreturn]] void writer_error(const std::string& what) { throw GgufError("gguf writer: " + what); }

// Closes a file descriptor and unmaps a mapping however write_file leaves.
struct MappedOutput {
  int fd = -1;
  void* map = MAP_FAILED;
  size_t size = 0;
  ~MappedOutput() {
    if (map != MAP_FAILED) ::munmap(map, size);
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

void GgufWriter::put_kv(std::string key, ValueType type, std::vector<uint8_t> payload) {
  if (key.empty()) writer_error("empty metadata key");
  auto kv = std::make_shared<Kv>(Kv{std::move(key), type, std::move(payload)});
  for (auto& existing : kv_)
    if (existing->key == kv->key) {
      existing = std::move(kv);
      return;
    }
  kv_.push_back(std::move(kv));
}

void GgufWriter::put_array(std::string key, ValueType elem, const void* data, size_t n, size_t elem_size) {
  std::vector<uint8_t> payload;
  append<uint32_t>(payload, static_cast<uint32_t>(elem));
  append<uint64_t>(payload, n);
  const auto* bytes = static_cast<const uint8_t*>(data);
  payload.insert(payload.end(), bytes, bytes + n * elem_size);
  put_kv(std::move(key), ValueType::ARRAY, std::move(payload));
}

void GgufWriter::set_u8(std::string key, uint8_t v) { put_kv(std::move(key), ValueType::U8, encode(v)); }
void GgufWriter::set_i8(std::string key, int8_t v) { put_kv(std::move(key), ValueType::I8, encode(v)); }
void GgufWriter::set_u16(std::string key, uint16_t v) { put_kv(std::move(key), ValueType::U16, encode(v)); }
void GgufWriter::set_i16(std::string key, int16_t v) { put_kv(std::move(key), ValueType::I16, encode(v)); }
void GgufWriter::set_u32(std::string key, uint32_t v) { put_kv(std::move(key), ValueType::U32, encode(v)); }
void GgufWriter::set_i32(std::string key, int32_t v) { put_kv(std::move(key), ValueType::I32, encode(v)); }
void GgufWriter::set_u64(std::string key, uint64_t v) { put_kv(std::move(key), ValueType::U64, encode(v)); }
void GgufWriter::set_i64(std::string key, int64_t v) { put_kv(std::move(key), ValueType::I64, encode(v)); }
void GgufWriter::set_f32(std::string key, float v) { put_kv(std::move(key), ValueType::F32, encode(v)); }
void GgufWriter::set_f64(std::string key, double v) { put_kv(std::move(key), ValueType::F64, encode(v)); }
void GgufWriter::set_bool(std::string key, bool v) {
  put_kv(std::move(key), ValueType::BOOL, encode<uint8_t>(v ? 1 : 0));
}

void GgufWriter::set_string(std::string key, std::string v) {
  std::vector<uint8_t> payload;
  append_string(payload, v);
  put_kv(std::move(key), ValueType::STRING, std::move(payload));
}

void GgufWriter::set_u8_array(std::string key, std::vector<uint8_t> v) {
  put_array(std::move(key), ValueType::U8, v.data(), v.size(), sizeof v[0]);
}
void GgufWriter::set_i32_array(std::string key, std::vector<int32_t> v) {
  put_array(std::move(key), ValueType::I32, v.data(), v.size(), sizeof v[0]);
}
void GgufWriter::set_i64_array(std::string key, std::vector<int64_t> v) {
  put_array(std::move(key), ValueType::I64, v.data(), v.size(), sizeof v[0]);
}
void GgufWriter::set_f32_array(std::string key, std::vector<float> v) {
  put_array(std::move(key), ValueType::F32, v.data(), v.size(), sizeof v[0]);
}
void GgufWriter::set_f64_array(std::string key, std::vector<double> v) {
  put_array(std::move(key), ValueType::F64, v.data(), v.size(), sizeof v[0]);
}

void GgufWriter::set_string_array(std::string key, std::vector<std::string> v) {
  std::vector<uint8_t> payload;
  append<uint32_t>(payload, static_cast<uint32_t>(ValueType::STRING));
  append<uint64_t>(payload, v.size());
  for (const std::string& s : v) append_string(payload, s);
  put_kv(std::move(key), ValueType::ARRAY, std::move(payload));
}

void GgufWriter::set_alignment(uint32_t a) {
  if (!std::has_single_bit(a)) writer_error("alignment " + std::to_string(a) + " is not a power of two");
  alignment_ = a;
  set_u32("general.alignment", a);
}

size_t GgufWriter::add_tensor(std::string name, DType type, std::vector<int64_t> dims) {
  if (name.empty()) writer_error("empty tensor name");
  for (const auto& t : tensors_)
    if (t->name == name) writer_error("duplicate tensor name " + name);
  if (dims.empty() || dims.size() > 4) writer_error("tensor " + name + " must have 1 to 4 dimensions");
  int64_t rows = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] <= 0) writer_error("tensor " + name + " has a dimension <= 0");
    if (i > 0) rows *= dims[i];
  }
  if (!row_fits_blocks(type, dims[0]))
    writer_error("tensor " + name + ": row of " + std::to_string(dims[0]) + " elements is not a whole number of " +
                 std::string(type_name(type)) + " blocks");
  size_t nbytes = row_bytes(type, dims[0]) * static_cast<size_t>(rows);
  tensors_.push_back(std::make_shared<Tensor>(Tensor{std::move(name), type, std::move(dims), nbytes}));
  return tensors_.size() - 1;
}

size_t GgufWriter::tensor_count() const { return tensors_.size(); }
size_t GgufWriter::tensor_bytes(size_t index) const { return tensors_.at(index)->nbytes; }

std::vector<uint64_t> GgufWriter::offsets() const {
  std::vector<uint64_t> out;
  uint64_t at = 0;
  for (const auto& t : tensors_) {
    out.push_back(at);
    at = format::align_up(at + t->nbytes, alignment_);
  }
  out.push_back(at);  // end of the data section
  return out;
}

std::vector<uint8_t> GgufWriter::header() const {
  std::vector<uint8_t> out;
  append<uint32_t>(out, format::kMagic);
  append<uint32_t>(out, format::kVersion);
  append<uint64_t>(out, tensors_.size());
  append<uint64_t>(out, kv_.size());
  for (const auto& kv : kv_) {
    append_string(out, kv->key);
    append<uint32_t>(out, static_cast<uint32_t>(kv->type));
    out.insert(out.end(), kv->payload.begin(), kv->payload.end());
  }
  std::vector<uint64_t> offs = offsets();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = *tensors_[i];
    append_string(out, t.name);
    append<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) append<uint64_t>(out, static_cast<uint64_t>(d));
    append<uint32_t>(out, static_cast<uint32_t>(t.type));
    append<uint64_t>(out, offs[i]);
  }
  out.resize(format::align_up(out.size(), alignment_), 0);
  return out;
}

uint64_t GgufWriter::total_bytes() const { return header().size() + offsets().back(); }

std::vector<uint8_t> GgufWriter::write_memory(const FillFn& fill) const {
  std::vector<uint8_t> out = header();
  const size_t data_offset = out.size();
  std::vector<uint64_t> offs = offsets();
  out.resize(data_offset + offs.back(), 0);
  for (size_t i = 0; i < tensors_.size(); ++i) fill(i, out.data() + data_offset + offs[i]);
  return out;
}

void GgufWriter::write_file(const std::string& path, const FillFn& fill, int n_threads) const {
  const std::vector<uint8_t> head = header();
  const std::vector<uint64_t> offs = offsets();
  const size_t total = head.size() + offs.back();
  // Written under a temporary name and renamed at the end, so a failed write
  // never leaves a plausible-looking partial model behind.
  const std::string tmp_path = path + ".tmp";
  auto fail = [&](const std::string& what) {
    int err = errno;
    ::unlink(tmp_path.c_str());
    writer_error(path + ": " + what + ": " + std::strerror(err));
  };
  {
    MappedOutput out;
    out.fd = ::open(tmp_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out.fd < 0) fail("cannot create");
    if (::ftruncate(out.fd, static_cast<off_t>(total)) != 0) fail("cannot size the file");
    out.map = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, out.fd, 0);
    if (out.map == MAP_FAILED) fail("cannot map");
    out.size = total;
    auto* base = static_cast<uint8_t*>(out.map);
    std::memcpy(base, head.data(), head.size());  // padding after it is already zero

    // Workers take the next unfilled tensor until none are left; the first
    // exception stops them all and is rethrown here.
    std::atomic<size_t> next{0};
    std::atomic<bool> stop{false};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto worker = [&] {
      for (size_t i; !stop && (i = next.fetch_add(1)) < tensors_.size();) {
        try {
          fill(i, base + head.size() + offs[i]);
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (!error) error = std::current_exception();
          stop = true;
        }
      }
    };
    size_t n_workers =
        std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(std::max(n_threads, 1)), tensors_.size()));
    std::vector<std::thread> threads;
    for (size_t t = 1; t < n_workers; ++t) threads.emplace_back(worker);
    worker();
    for (auto& t : threads) t.join();
    if (error) {
      ::unlink(tmp_path.c_str());
      std::rethrow_exception(error);
    }
    if (::msync(out.map, total, MS_SYNC) != 0) fail("cannot flush");
  }
  if (::rename(tmp_path.c_str(), path.c_str()) != 0) fail("cannot rename the finished file into place");
}

}  // namespace zinc::gguf
