// GgufWriter round trips: what it writes, the reader reads back unchanged, from
// memory and from a file written by several threads.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <stdexcept>

#include "gguf/gguf.h"
#include "gguf_test_files.h"
#include "test_util.h"

namespace zinc::gguf {
namespace {

void expect_sample_contents(const GgufFile& f) {
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.architecture(), "llama");
  EXPECT_EQ(f.get_string("general.name"), "zinc sample");
  EXPECT_EQ(f.get_int("llama.block_count"), 2);
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(f.get_int_array("llama.rope.dimension_sections"), (std::vector<int64_t>{11, 11, 10, 0}));
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 64u);
  EXPECT_EQ(tokens[0], "<s>");
  EXPECT_EQ(tokens[1], "</s>");
  EXPECT_EQ(f.get_float_array("tokenizer.ggml.scores")[5], -5.0);
  EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_FALSE(f.get_bool("tokenizer.ggml.add_eos_token"));
  EXPECT_EQ(f.get_int("zinc.test.u8"), 200);
  EXPECT_EQ(f.get_int("zinc.test.i8"), -100);
  EXPECT_EQ(f.get_int("zinc.test.u16"), 60000);
  EXPECT_EQ(f.get_int("zinc.test.i16"), -30000);
  EXPECT_EQ(f.get_int("zinc.test.u64"), 1ll << 40);
  EXPECT_EQ(f.get_int("zinc.test.i64"), -(1ll << 40));
  EXPECT_EQ(f.get_float("zinc.test.f64"), 2.5);
  EXPECT_EQ(f.get_int_array("zinc.test.u8_array"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(f.get_int_array("zinc.test.i64_array"), (std::vector<int64_t>{-1, 1ll << 50}));
  EXPECT_EQ(f.get_float_array("zinc.test.f64_array"), (std::vector<double>{0.5, -0.25}));
  EXPECT_EQ(f.key_of(f.metadata().front()), "general.architecture");  // insertion order
  EXPECT_EQ(f.key_of(f.metadata().back()), "zinc.test.f64_array");

  ASSERT_EQ(f.tensors().size(), 6u);
  const TensorInfo& q4k = f.tensor("blk.0.attn_q.weight");
  EXPECT_EQ(q4k.type, DType::Q4_K);
  EXPECT_EQ(q4k.dims, (std::vector<int64_t>{256, 256}));
  EXPECT_EQ(q4k.nbytes, 256u * 144u);
  EXPECT_EQ(f.tensor("blk.0.ffn_down.weight").dims, (std::vector<int64_t>{64, 4, 2}));
  EXPECT_EQ(f.tensor("blk.0.ffn_down.weight").rows(), 8);
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const TensorInfo& t = f.tensors()[i];
    EXPECT_EQ(t.offset % f.alignment(), 0u) << t.name;
    EXPECT_EQ(t.nbytes, row_bytes(t.type, t.dim(0)) * static_cast<size_t>(t.rows())) << t.name;
    size_t wrong = 0;
    for (size_t j = 0; j < t.nbytes; ++j) wrong += t.data[j] != test::sample_byte(i, j);
    EXPECT_EQ(wrong, 0u) << t.name;
  }
}

TEST(GgufWriter, RoundTripsInMemory) {
  std::vector<uint8_t> bytes = test::sample_gguf_bytes();
  EXPECT_EQ(bytes.size(), test::sample_writer().total_bytes());
  auto f = GgufFile::from_memory(bytes);
  expect_sample_contents(*f);
  EXPECT_EQ(f->file_size(), bytes.size());
}

TEST(GgufWriter, WritesFilesInParallelFillingEachTensorOnce) {
  GgufWriter w = test::sample_writer();
  for (int i = 0; i < 40; ++i) w.add_tensor("extra." + std::to_string(i), DType::F16, {32, i + 1});
  std::vector<std::atomic<int>> fills(w.tensor_count());
  std::string path = test::temp_dir() + "/parallel.gguf";
  w.write_file(
      path,
      [&](size_t i, uint8_t* dst) {
        fills[i]++;
        test::fill_sample_tensor(w, i, dst);
      },
      8);
  for (size_t i = 0; i < fills.size(); ++i) EXPECT_EQ(fills[i].load(), 1) << "tensor " << i;
  EXPECT_EQ(std::filesystem::file_size(path), w.total_bytes());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto f = GgufFile::open(path);
  ASSERT_EQ(f->tensors().size(), 46u);
  const TensorInfo& last = f->tensor("extra.39");
  EXPECT_EQ(last.nbytes, 32u * 40u * 2u);
  for (size_t j = 0; j < last.nbytes; ++j) ASSERT_EQ(last.data[j], test::sample_byte(45, j));
}

TEST(GgufWriter, ReplacesKeysInPlaceAndHonoursAlignment) {
  GgufWriter w;
  w.set_string("general.architecture", "x");
  w.set_u32("a", 1);
  w.set_alignment(128);
  w.set_string("general.architecture", "y");
  w.add_tensor("t0", DType::F32, {3});
  w.add_tensor("t1", DType::Q8_0, {64});
  auto bytes = w.write_memory([&](size_t i, uint8_t* dst) { std::fill(dst, dst + w.tensor_bytes(i), 0xab); });
  auto f = GgufFile::from_memory(bytes);
  ASSERT_EQ(f->metadata().size(), 3u);
  EXPECT_EQ(f->key_of(f->metadata()[0]), "general.architecture");
  EXPECT_EQ(f->architecture(), "y");
  EXPECT_EQ(f->alignment(), 128u);
  EXPECT_EQ(f->data_offset() % 128, 0u);
  EXPECT_EQ(f->tensor("t1").offset, 128u);
  EXPECT_EQ(f->tensor("t1").data[67], 0xab);
}

TEST(GgufWriter, RejectsMisuse) {
  GgufWriter w;
  EXPECT_THROW(w.set_alignment(48), GgufError);
  EXPECT_THROW(w.add_tensor("q", DType::Q4_K, {128}), GgufError);  // half a block
  EXPECT_THROW(w.add_tensor("z", DType::F32, {0}), GgufError);
  EXPECT_THROW(w.add_tensor("five", DType::F32, {1, 1, 1, 1, 1}), GgufError);
  EXPECT_THROW(w.add_tensor("", DType::F32, {1}), GgufError);
  w.add_tensor("t", DType::F32, {1});
  EXPECT_THROW(w.add_tensor("t", DType::F32, {1}), GgufError);
}

TEST(GgufWriter, FailedFillLeavesNoFile) {
  GgufWriter w = test::sample_writer();
  std::string path = test::temp_dir() + "/failed.gguf";
  EXPECT_THROW(w.write_file(
                   path,
                   [&](size_t i, uint8_t* dst) {
                     if (i == 3) throw std::runtime_error("fill failed");
                     test::fill_sample_tensor(w, i, dst);
                   },
                   4),
               std::runtime_error);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

}  // namespace
}  // namespace zinc::gguf
