// The GGUF reader on hand-built files: every value type, accessor errors, and one
// test per kind of corruption, each of which must produce a single-line GgufError
// that starts with the file name.
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <string>

#include "gguf/gguf.h"
#include "gguf_test_files.h"
#include "test_util.h"

namespace zinc::gguf {
namespace {

using test::RawGguf;

std::unique_ptr<GgufFile> parse(const RawGguf& raw) { return GgufFile::from_memory(raw.bytes, "bad.gguf"); }

// Parses `raw`, expecting a GgufError of one line naming the file and containing `expected`.
void expect_rejected(const RawGguf& raw, const std::string& expected) {
  try {
    parse(raw);
    ADD_FAILURE() << "parsed a file that should fail with: " << expected;
  } catch (const GgufError& e) {
    std::string what = e.what();
    EXPECT_EQ(what.rfind("bad.gguf: ", 0), 0u) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_NE(what.find(expected), std::string::npos) << "message: " << what << "\nexpected to contain: " << expected;
  }
}

// A valid file with one metadata key and one 32-element f32 tensor, built so tests
// can corrupt one field at a time.
struct OneTensor {
  uint32_t version = 3;
  uint64_t n_tensors = 1, n_kv = 1;
  std::string key = "general.architecture";
  std::string name = "t";
  std::vector<uint64_t> dims = {32};
  uint32_t type = static_cast<uint32_t>(DType::F32);
  uint64_t offset = 0;
  size_t data_bytes = 128;

  RawGguf build() const {
    RawGguf r;
    r.header(n_tensors, n_kv, version).kv_string(key, "llama");
    r.str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) r.u64(d);
    r.u32(type).u64(offset).pad_to(32).zeros(data_bytes);
    return r;
  }
};

TEST(GgufReader, ReadsEveryScalarType) {
  RawGguf r;
  r.header(0, 13);
  r.str("u8").type(ValueType::U8).put<uint8_t>(250);
  r.str("i8").type(ValueType::I8).put<int8_t>(-7);
  r.str("u16").type(ValueType::U16).put<uint16_t>(65000);
  r.str("i16").type(ValueType::I16).put<int16_t>(-32000);
  r.str("u32").type(ValueType::U32).put<uint32_t>(4000000000u);
  r.str("i32").type(ValueType::I32).put<int32_t>(-2000000000);
  r.str("u64").type(ValueType::U64).put<uint64_t>(std::numeric_limits<uint64_t>::max());
  r.str("i64").type(ValueType::I64).put<int64_t>(std::numeric_limits<int64_t>::min());
  r.str("f32").type(ValueType::F32).put<float>(1.5f);
  r.str("f64").type(ValueType::F64).put<double>(-2.25);
  r.str("bool").type(ValueType::BOOL).put<uint8_t>(1);
  r.str("string").type(ValueType::STRING).str("hello\nworld");
  r.str("empty").type(ValueType::STRING).str("");
  auto f = parse(r);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->get_int("u8"), 250);
  EXPECT_EQ(f->get_int("i8"), -7);
  EXPECT_EQ(f->get_int("u16"), 65000);
  EXPECT_EQ(f->get_int("i16"), -32000);
  EXPECT_EQ(f->get_int("u32"), 4000000000ll);
  EXPECT_EQ(f->get_int("i32"), -2000000000);
  EXPECT_EQ(f->find("u64")->as_uint(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f->get_int("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f->get_float("f32"), 1.5);
  EXPECT_EQ(f->get_float("f64"), -2.25);
  EXPECT_EQ(f->get_float("i8"), -7.0);  // integers convert to float
  EXPECT_TRUE(f->get_bool("bool"));
  EXPECT_EQ(f->get_string("string"), "hello\nworld");
  EXPECT_EQ(f->get_string("empty"), "");
  EXPECT_EQ(f->find("string")->to_display(), "\"hello\\nworld\"");
  EXPECT_EQ(f->find("i8")->to_display(), "-7");
  ASSERT_EQ(f->metadata().size(), 13u);
  EXPECT_EQ(f->key_of(f->metadata()[0]), "u8");  // file order kept
  EXPECT_EQ(f->key_of(f->metadata()[12]), "empty");
}

TEST(GgufReader, ReadsArraysIncludingNestedOnes) {
  RawGguf r;
  r.header(0, 7);
  r.str("u8s").type(ValueType::ARRAY).type(ValueType::U8).u64(3).put<uint8_t>(1).put<uint8_t>(2).put<uint8_t>(255);
  r.str("i16s").type(ValueType::ARRAY).type(ValueType::I16).u64(2).put<int16_t>(-5).put<int16_t>(5);
  r.str("u64s").type(ValueType::ARRAY).type(ValueType::U64).u64(1).put<uint64_t>(1ull << 63);
  r.str("f32s").type(ValueType::ARRAY).type(ValueType::F32).u64(2).put<float>(0.5f).put<float>(-1.0f);
  r.str("bools").type(ValueType::ARRAY).type(ValueType::BOOL).u64(2).put<uint8_t>(0).put<uint8_t>(1);
  r.str("strings").type(ValueType::ARRAY).type(ValueType::STRING).u64(3).str("a").str("").str("ccc");
  // An array of two arrays: [[1, 2], ["x"]].
  r.str("nested").type(ValueType::ARRAY).type(ValueType::ARRAY).u64(2);
  r.type(ValueType::I32).u64(2).put<int32_t>(1).put<int32_t>(2);
  r.type(ValueType::STRING).u64(1).str("x");
  auto f = parse(r);
  EXPECT_EQ(f->get_int_array("u8s"), (std::vector<int64_t>{1, 2, 255}));
  EXPECT_EQ(f->get_int_array("i16s"), (std::vector<int64_t>{-5, 5}));
  EXPECT_EQ(f->get_float_array("i16s"), (std::vector<double>{-5, 5}));
  EXPECT_THROW(f->get_int_array("u64s"), GgufError);  // 2^63 does not fit int64
  EXPECT_EQ(f->get_float_array("f32s"), (std::vector<double>{0.5, -1.0}));
  EXPECT_EQ(f->find("bools")->array_type(), ValueType::BOOL);
  EXPECT_EQ(f->find("bools")->array_size(), 2u);
  auto strings = f->get_string_array("strings");
  ASSERT_EQ(strings.size(), 3u);
  EXPECT_EQ(strings[0], "a");
  EXPECT_EQ(strings[1], "");
  EXPECT_EQ(strings[2], "ccc");
  const Value* nested = f->find("nested");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->array_type(), ValueType::ARRAY);
  EXPECT_EQ(nested->array_size(), 2u);
  EXPECT_THROW(nested->array_int(0), GgufError);
  EXPECT_EQ(f->find("u8s")->to_display(), "[1, 2, 255]");
  EXPECT_EQ(f->find("strings")->to_display(2), "[\"a\", \"\", ...] (3 items)");
}

TEST(GgufReader, AccessorErrorsNameTheKey) {
  RawGguf r;
  r.header(0, 4).kv_string("s", "text").kv_u32("n", 7);
  r.str("neg").type(ValueType::I32).put<int32_t>(-1);
  r.str("ints").type(ValueType::ARRAY).type(ValueType::I32).u64(1).put<int32_t>(3);
  auto f = parse(r);
  auto message = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const GgufError& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(message([&] { f->get_int("missing.key"); }), "bad.gguf: missing key missing.key");
  EXPECT_EQ(message([&] { f->get_int("s"); }), "bad.gguf: key s is string, expected an integer");
  EXPECT_EQ(message([&] { f->get_string("n"); }), "bad.gguf: key n is u32, expected a string");
  EXPECT_EQ(message([&] { f->get_bool("n"); }), "bad.gguf: key n is u32, expected a bool");
  EXPECT_EQ(message([&] { f->get_string_array("ints"); }),
            "bad.gguf: key ints is an array of i32, expected an array of strings");
  EXPECT_EQ(message([&] { f->get_int_array("s"); }), "bad.gguf: key s is string, expected an array");
  EXPECT_EQ(message([&] { f->find("ints")->array_int(1); }), "key ints: index 1 is past the end of its 1 items");
  EXPECT_EQ(message([&] { f->find("neg")->as_uint(); }), "key neg is -1, expected a non-negative integer");
  EXPECT_EQ(message([&] { f->tensor("nope"); }), "bad.gguf: missing tensor nope");
  EXPECT_EQ(f->get_int_or("absent", 42), 42);
  EXPECT_EQ(f->get_string_or("absent", "dflt"), "dflt");
  EXPECT_EQ(f->get_float_or("absent", 0.5), 0.5);
  EXPECT_TRUE(f->get_bool_or("absent", true));
  EXPECT_EQ(f->get_int_or("n", 42), 7);
  EXPECT_THROW(f->get_int_or("s", 42), GgufError);  // present but mistyped
  EXPECT_THROW(f->architecture(), GgufError);
}

TEST(GgufReader, ReadsTensorsAndVersion2) {
  OneTensor t;
  t.version = 2;
  auto raw = t.build();
  for (size_t i = 0; i < 128; ++i) raw.bytes[raw.bytes.size() - 128 + i] = static_cast<uint8_t>(i);
  auto f = parse(raw);
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->architecture(), "llama");
  const TensorInfo& info = f->tensor("t");
  EXPECT_EQ(info.type, DType::F32);
  EXPECT_EQ(info.dims, std::vector<int64_t>{32});
  EXPECT_EQ(info.nbytes, 128u);
  EXPECT_EQ(info.data, raw.bytes.data() + f->data_offset());
  EXPECT_EQ(info.data[127], 127);
  EXPECT_EQ(f->data_offset() % 32, 0u);
}

// ---- corrupt files -----------------------------------------------------------------

TEST(GgufReaderRejects, BadMagicAndVersions) {
  RawGguf magic;
  magic.u32(0x746a6767).u32(3).u64(0).u64(0);  // "ggjt"
  expect_rejected(magic, "not a GGUF file (magic \"ggjt\"");
  OneTensor v1;
  v1.version = 1;
  expect_rejected(v1.build(), "GGUF version 1 is not supported");
  OneTensor v9;
  v9.version = 9;
  expect_rejected(v9.build(), "unknown GGUF version 9");
  OneTensor big_endian;
  big_endian.version = 0x03000000;
  expect_rejected(big_endian.build(), "big-endian");
}

TEST(GgufReaderRejects, TruncatedHeaderAndData) {
  RawGguf tiny;
  tiny.u32(0x46554747).bytes.pop_back();
  expect_rejected(tiny, "too small to be a GGUF file (3 bytes)");
  RawGguf header;
  header.u32(0x46554747).u32(3).u32(0);
  expect_rejected(header, "truncated header: tensor count at byte 8");
  RawGguf mid_kv;
  mid_kv.header(0, 1).kv_string("general.architecture", "llama");
  mid_kv.bytes.resize(24 + 8 + 10);  // inside the key's name
  expect_rejected(mid_kv, "truncated in metadata key #0");
  RawGguf data = OneTensor{}.build();
  data.bytes.resize(data.bytes.size() - 1);
  expect_rejected(data, "truncated: tensor t needs bytes 0..128 of the data section, which has 127");
}

TEST(GgufReaderRejects, LengthsPastTheEnd) {
  RawGguf key;
  key.header(0, 1).u64(1ull << 60).zeros(16);
  expect_rejected(key, "needs 1152921504606846976 bytes");
  RawGguf value;
  value.header(0, 1).str("k").type(ValueType::STRING).u64(~0ull).zeros(8);
  expect_rejected(value, "truncated in metadata key k: string");
  RawGguf array;  // must not allocate 2^60 elements
  array.header(0, 1).str("k").type(ValueType::ARRAY).type(ValueType::U32).u64(1ull << 60).zeros(16);
  expect_rejected(array, "an array of 1152921504606846976 u32 elements");
  RawGguf strings;
  strings.header(0, 1).str("k").type(ValueType::ARRAY).type(ValueType::STRING).u64(1ull << 60).zeros(16);
  expect_rejected(strings, "an array of 1152921504606846976 string elements");
  RawGguf nested;
  nested.header(0, 1).str("k").type(ValueType::ARRAY).type(ValueType::ARRAY).u64(1).type(ValueType::U8).u64(~0ull);
  expect_rejected(nested, "an array of 18446744073709551615 u8 elements");
}

TEST(GgufReaderRejects, AbsurdCounts) {
  RawGguf tensors;
  tensors.header(1ull << 62, 0).zeros(64);
  expect_rejected(tensors, "header claims 4611686018427387904 tensors");
  RawGguf kvs;
  kvs.header(0, ~0ull).zeros(64);
  expect_rejected(kvs, "header claims 18446744073709551615 metadata keys");
}

TEST(GgufReaderRejects, BadKeys) {
  RawGguf dup;
  dup.header(0, 2).kv_u32("a.b", 1).kv_u32("a.b", 2);
  expect_rejected(dup, "duplicate metadata key a.b");
  RawGguf empty;
  empty.header(0, 1).kv_u32("", 1);
  expect_rejected(empty, "metadata key #0 has an empty name");
  RawGguf type;
  type.header(0, 1).str("k").u32(13).u32(0);
  expect_rejected(type, "unknown value type 13 in metadata key k");
  RawGguf elem;
  elem.header(0, 1).str("k").type(ValueType::ARRAY).u32(99).u64(0);
  expect_rejected(elem, "unknown value type 99");
  RawGguf deep;
  deep.header(0, 1).str("k").type(ValueType::ARRAY);
  for (int i = 0; i < 20; ++i) deep.type(ValueType::ARRAY).u64(1);  // [[[[...]]]]
  deep.zeros(64);
  expect_rejected(deep, "arrays nested more than 16 deep");
}

TEST(GgufReaderRejects, BadDimensions) {
  OneTensor zero_dims;
  zero_dims.dims = {};
  expect_rejected(zero_dims.build(), "tensor t has 0 dimensions (expected 1 to 4)");
  OneTensor five_dims;
  five_dims.dims = {32, 1, 1, 1, 1};
  expect_rejected(five_dims.build(), "tensor t has 5 dimensions (expected 1 to 4)");
  OneTensor zero;
  zero.dims = {32, 0};
  expect_rejected(zero.build(), "tensor t has dimension 1 = 0 (expected a positive size)");
  OneTensor negative;
  negative.dims = {32, ~0ull};
  expect_rejected(negative.build(), "tensor t has dimension 1 = -1 (expected a positive size)");
  OneTensor overflow;
  overflow.dims = {32, 1ull << 31, 1ull << 31};
  expect_rejected(overflow.build(), "tensor t has dimensions whose product overflows int64");
}

TEST(GgufReaderRejects, BadTypesAndRows) {
  OneTensor unknown;
  unknown.type = 99;
  expect_rejected(unknown.build(), "tensor t has unknown type id 99");
  OneTensor partial_block;
  partial_block.type = static_cast<uint32_t>(DType::Q8_0);
  partial_block.dims = {33};
  expect_rejected(partial_block.build(),
                  "tensor t (q8_0) has rows of 33 elements, not a multiple of the block size 32");
  OneTensor huge;  // element count fits int64, byte count does not fit the file
  huge.type = static_cast<uint32_t>(DType::F64);
  huge.dims = {1ull << 61};
  expect_rejected(huge.build(), "tensor t is too large for a byte count");
}

TEST(GgufReaderRejects, BadTensorPlacement) {
  OneTensor out_of_bounds;
  out_of_bounds.offset = 1ull << 62;
  expect_rejected(out_of_bounds.build(), "truncated: tensor t needs bytes 4611686018427387904..");
  OneTensor misaligned;
  misaligned.offset = 16;
  expect_rejected(misaligned.build(), "tensor t has data offset 16, not a multiple of the alignment 32");

  RawGguf overlap;
  overlap.header(2, 0).tensor_info("a", {64}, DType::F32, 0).tensor_info("b", {32}, DType::F32, 128);
  overlap.pad_to(32).zeros(512);
  expect_rejected(overlap, "tensors a and b overlap in the data section (at offset 128)");
  RawGguf same_offset;
  same_offset.header(2, 0).tensor_info("a", {32}, DType::F32, 0).tensor_info("b", {32}, DType::F32, 0);
  same_offset.pad_to(32).zeros(512);
  expect_rejected(same_offset, "overlap");

  RawGguf dup;
  dup.header(2, 0).tensor_info("a", {32}, DType::F32, 0).tensor_info("a", {32}, DType::F32, 128);
  dup.pad_to(32).zeros(512);
  expect_rejected(dup, "duplicate tensor name a");
  RawGguf empty;
  empty.header(1, 0).tensor_info("", {32}, DType::F32, 0).pad_to(32).zeros(128);
  expect_rejected(empty, "tensor #0 has an empty name");
}

TEST(GgufReaderRejects, BadAlignment) {
  RawGguf not_pow2;
  not_pow2.header(0, 1).kv_u32("general.alignment", 48);
  expect_rejected(not_pow2, "general.alignment is 48, expected a power of two");
  RawGguf zero;
  zero.header(0, 1).kv_u32("general.alignment", 0);
  expect_rejected(zero, "general.alignment is 0, expected a power of two");
  RawGguf text;
  text.header(0, 1).kv_string("general.alignment", "32");
  expect_rejected(text, "general.alignment is string, expected an unsigned integer");

  // A custom alignment moves the data section and is what offsets are checked against.
  RawGguf custom;
  custom.header(1, 1).kv_u32("general.alignment", 64).tensor_info("t", {32}, DType::F32, 0).pad_to(64).zeros(128);
  auto f = parse(custom);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
}

TEST(GgufReaderFiles, OpenReportsPathProblems) {
  std::string dir = test::temp_dir();
  auto message = [](const std::string& path) -> std::string {
    try {
      GgufFile::open(path);
    } catch (const GgufError& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(message(dir + "/absent.gguf").rfind(dir + "/absent.gguf: cannot open: ", 0), 0u);
  EXPECT_EQ(message(dir), dir + ": not a regular file");
  std::ofstream(dir + "/empty.gguf").close();
  EXPECT_EQ(message(dir + "/empty.gguf"), dir + "/empty.gguf: empty file, not a GGUF model");
  RawGguf cut = OneTensor{}.build();
  cut.bytes.resize(cut.bytes.size() - 64);
  std::ofstream(dir + "/cut.gguf", std::ios::binary)
      .write(reinterpret_cast<const char*>(cut.bytes.data()), cut.bytes.size());
  EXPECT_EQ(message(dir + "/cut.gguf").rfind(dir + "/cut.gguf: truncated: tensor t", 0), 0u);
}

}  // namespace
}  // namespace zinc::gguf
