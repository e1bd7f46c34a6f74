// Mutation fuzzing of the GGUF reader: mutants of a realistic small model are
// parsed, and whatever parses is read in full. Only GgufError may come out; under
// ASan+UBSan any out-of-bounds read or undefined behaviour fails the run too.
// Runs for ZINC_FUZZ_SECONDS (default 10); ZINC_FUZZ_SEED replays a run.
#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <type_traits>

#include "gguf/gguf.h"
#include "gguf_test_files.h"

namespace zinc::gguf {
namespace {

uint64_t env_u64(const char* name, uint64_t def) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : def;
}

class Mutator {
 public:
  Mutator(uint64_t seed, size_t header_bytes) : rng_(seed), header_bytes_(header_bytes) {}

  std::vector<uint8_t> mutate(std::vector<uint8_t> b) {
    int n = 1 + static_cast<int>(pick(4));
    for (int i = 0; i < n; ++i) mutate_once(b);
    return b;
  }

 private:
  std::mt19937_64 rng_;
  size_t header_bytes_;

  uint64_t pick(uint64_t n) { return n ? rng_() % n : 0; }

  // Mostly inside the header, where every byte is a field the parser reads.
  size_t position(const std::vector<uint8_t>& b) {
    if (b.empty()) return 0;
    size_t limit = pick(10) < 9 ? std::min(header_bytes_, b.size()) : b.size();
    return static_cast<size_t>(pick(limit));
  }

  template <class T>
  void overwrite(std::vector<uint8_t>& b, T v) {
    if (b.size() < sizeof v) return;
    size_t at = std::min(position(b), b.size() - sizeof v);
    std::memcpy(b.data() + at, &v, sizeof v);
  }

  void mutate_once(std::vector<uint8_t>& b) {
    static constexpr uint8_t kBytes[] = {0x00, 0xff, 0x7f, 0x80, 0x01, 0x20};
    static constexpr uint32_t kU32[] = {0, 1, 4, 5, 9, 12, 13, 99, 0x7fffffff, 0x80000000u, 0xffffffffu};
    const uint64_t kU64[] = {0,           1,       1ull << 31,   1ull << 32,      1ull << 60,       1ull << 62,
                             1ull << 63,  ~0ull,   b.size(),     b.size() + 1,    0x7fffffffffffffffull};
    switch (pick(9)) {
      case 0:
        if (!b.empty()) b[position(b)] ^= static_cast<uint8_t>(1u << pick(8));
        break;
      case 1:
        if (!b.empty()) b[position(b)] = kBytes[pick(std::size(kBytes))];
        break;
      case 2:
        b.resize(position(b));
        break;
      case 3: {
        size_t at = position(b), n = 1 + pick(16);
        std::vector<uint8_t> ins(n);
        for (auto& c : ins) c = static_cast<uint8_t>(rng_());
        b.insert(b.begin() + static_cast<ptrdiff_t>(at), ins.begin(), ins.end());
        break;
      }
      case 4: {
        size_t at = position(b), n = std::min<size_t>(1 + pick(16), b.size() - at);
        b.erase(b.begin() + static_cast<ptrdiff_t>(at), b.begin() + static_cast<ptrdiff_t>(at + n));
        break;
      }
      case 5:
        overwrite(b, kU64[pick(std::size(kU64))]);
        break;
      case 6:
        overwrite(b, kU32[pick(std::size(kU32))]);
        break;
      case 7:
        overwrite(b, static_cast<uint64_t>(rng_()));
        break;
      default: {  // copy a run of bytes elsewhere: duplicates keys, names and fields
        if (b.size() < 2) break;
        size_t from = position(b), to = position(b), n = std::min<size_t>(1 + pick(64), b.size() - std::max(from, to));
        std::memmove(b.data() + to, b.data() + from, n);
        break;
      }
    }
  }
};

// Reads everything a parsed file offers, through every accessor; returns a
// checksum so nothing is optimised away.
uint64_t read_everything(const GgufFile& f) {
  uint64_t sum = f.version() + f.alignment() + f.data_offset();
  auto attempt = [&](auto&& fn) {
    try {
      auto r = fn();
      if constexpr (std::is_floating_point_v<decltype(r)>)
        sum += std::bit_cast<uint64_t>(r);  // NaN and huge values have no integer value
      else
        sum += static_cast<uint64_t>(r);
    } catch (const GgufError& e) {
      sum += std::string(e.what()).size();
    }
  };
  // Each value through the accessors its type allows, plus one it does not (the
  // error paths are unit-tested; here they only need to be safe).
  for (const Value& v : f.metadata()) {
    const std::string& key = f.key_of(v);
    sum += v.to_display().size() + v.to_display(1000).size();
    sum += f.find(key) == &v;
    if (v.is_integer()) {
      attempt([&] { return v.as_int(); });
      attempt([&] { return v.as_uint(); });
    }
    if (v.is_integer() || v.is_float()) attempt([&] { return v.as_float(); });
    if (v.type() == ValueType::BOOL) sum += v.as_bool();
    if (v.type() == ValueType::STRING) sum += v.as_string().size();
    attempt([&] { return v.type() == ValueType::STRING ? v.as_bool() : v.as_string().size(); });
    if (!v.is_array()) continue;
    const ValueType t = v.array_type();
    const size_t n = v.array_size();
    if (t == ValueType::STRING) {
      sum += f.get_string_array(key).size();
      for (size_t i = 0; i < n; ++i) sum += v.array_string(i).size();
    } else if (t != ValueType::ARRAY && t != ValueType::BOOL) {
      attempt([&] { return f.get_float_array(key).size(); });
      attempt([&] { return f.get_int_array(key).size(); });
    }
    attempt([&] { return v.array_float(n); });  // one past the end
    attempt([&] { return t == ValueType::STRING ? v.array_int(0) : v.array_string(0).size(); });
  }
  attempt([&] { return f.architecture().size(); });
  for (const TensorInfo& t : f.tensors()) {
    EXPECT_EQ(f.find_tensor(t.name), &t);
    EXPECT_EQ(t.nbytes, row_bytes(t.type, t.dim(0)) * static_cast<size_t>(t.rows())) << t.name;
    for (size_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
  }
  return sum;
}

TEST(GgufFuzz, MutantsParseOrFailWithOneLineError) {
  const std::vector<uint8_t> base = test::sample_gguf_bytes();
  const size_t header_bytes = GgufFile::from_memory(base)->data_offset();
  const uint64_t seconds = env_u64("ZINC_FUZZ_SECONDS", 10);
  const uint64_t seed = env_u64("ZINC_FUZZ_SEED", std::random_device{}());
  Mutator mutator(seed, header_bytes);

  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::seconds(seconds);
  uint64_t tried = 0, parsed = 0, rejected = 0, checksum = 0;
  while (std::chrono::steady_clock::now() < deadline || tried < 100) {
    std::vector<uint8_t> mutant = mutator.mutate(base);
    // An exact-size heap copy, so ASan sees any read one byte past the end.
    auto exact = std::make_unique<uint8_t[]>(mutant.size());
    std::copy(mutant.begin(), mutant.end(), exact.get());
    ++tried;
    try {
      auto f = GgufFile::from_memory({exact.get(), mutant.size()}, "fuzz.gguf");
      checksum += read_everything(*f);
      ++parsed;
    } catch (const GgufError& e) {
      std::string what = e.what();
      ASSERT_EQ(what.rfind("fuzz.gguf: ", 0), 0u) << what << " (seed " << seed << ")";
      ASSERT_EQ(what.find('\n'), std::string::npos) << what << " (seed " << seed << ")";
      ++rejected;
    } catch (const std::exception& e) {
      FAIL() << "mutant " << tried << " threw a non-GgufError: " << e.what() << " (seed " << seed << ")";
    }
  }
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("gguf fuzz: %llu mutants in %.1f s (%llu parsed, %llu rejected), seed %llu, checksum %llx\n",
              static_cast<unsigned long long>(tried), elapsed, static_cast<unsigned long long>(parsed),
              static_cast<unsigned long long>(rejected), static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(checksum));
  // A mutator that breaks nothing, or everything, is not testing the parser.
  EXPECT_GT(parsed, tried / 50);
  EXPECT_GT(rejected, tried / 50);
}

}  // namespace
}  // namespace zinc::gguf
