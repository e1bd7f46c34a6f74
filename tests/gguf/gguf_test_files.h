// Test inputs for the gguf layer: a byte-level builder for hand-made (and
// deliberately corrupt) GGUF files, and a realistic small model made with
// GgufWriter for round trips, fuzzing and `zinc inspect`.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"

namespace zinc::test {

// Appends GGUF fields one by one, so a test can write any byte sequence.
struct RawGguf {
  std::vector<uint8_t> bytes;

  template <class T>
  RawGguf& put(T v) {
    size_t at = bytes.size();
    bytes.resize(at + sizeof v);
    std::memcpy(bytes.data() + at, &v, sizeof v);
    return *this;
  }
  RawGguf& u32(uint32_t v) { return put(v); }
  RawGguf& u64(uint64_t v) { return put(v); }
  RawGguf& str(std::string_view s) {
    u64(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
    return *this;
  }
  RawGguf& type(gguf::ValueType t) { return u32(static_cast<uint32_t>(t)); }
  RawGguf& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return u32(0x46554747).u32(version).u64(n_tensors).u64(n_kv);
  }
  RawGguf& kv_u32(std::string_view key, uint32_t v) { return str(key).type(gguf::ValueType::U32).u32(v); }
  RawGguf& kv_string(std::string_view key, std::string_view v) { return str(key).type(gguf::ValueType::STRING).str(v); }
  RawGguf& tensor_info(std::string_view name, std::vector<uint64_t> dims, DType t, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(static_cast<uint32_t>(t)).u64(offset);
  }
  RawGguf& pad_to(size_t alignment) {
    bytes.resize((bytes.size() + alignment - 1) / alignment * alignment, 0);
    return *this;
  }
  RawGguf& zeros(size_t n) {
    bytes.resize(bytes.size() + n, 0);
    return *this;
  }
};

// Deterministic, position-dependent tensor bytes: a wrong offset shows up as a
// wrong byte.
inline uint8_t sample_byte(size_t tensor, size_t i) {
  return static_cast<uint8_t>((tensor * 131 + i * 7 + (i >> 8)) ^ 0x5a);
}

inline void fill_sample_tensor(const gguf::GgufWriter& w, size_t index, uint8_t* dst) {
  for (size_t i = 0; i < w.tensor_bytes(index); ++i) dst[i] = sample_byte(index, i);
}

// A small model shaped like a real one: a few dozen metadata keys of most types
// (tokenizer string arrays included) and tensors of several quant types.
inline gguf::GgufWriter sample_writer() {
  gguf::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "zinc sample");
  w.set_u32("general.quantization_version", 2);
  w.set_u32("general.file_type", 7);
  w.set_u32("llama.block_count", 2);
  w.set_u32("llama.context_length", 4096);
  w.set_u32("llama.embedding_length", 256);
  w.set_u32("llama.feed_forward_length", 512);
  w.set_u32("llama.attention.head_count", 4);
  w.set_u32("llama.attention.head_count_kv", 2);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_f32("llama.rope.freq_base", 10000.0f);
  w.set_u32("llama.rope.dimension_count", 64);
  w.set_i32_array("llama.rope.dimension_sections", {11, 11, 10, 0});
  w.set_u32("llama.vocab_size", 64);
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "llama-bpe");
  std::vector<std::string> tokens, merges;
  std::vector<int32_t> token_types;
  std::vector<float> scores;
  for (int i = 0; i < 64; ++i) {
    tokens.push_back(i < 3 ? std::string(i == 0 ? "<s>" : i == 1 ? "</s>" : "<unk>")
                           : std::string(1 + i % 5, char('a' + i % 26)));
    token_types.push_back(i < 3 ? 3 : 1);
    scores.push_back(-static_cast<float>(i));
  }
  for (int i = 0; i < 20; ++i) merges.push_back(std::string(1, char('a' + i)) + " " + std::string(1, char('b' + i)));
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_i32_array("tokenizer.ggml.token_type", token_types);
  w.set_f32_array("tokenizer.ggml.scores", scores);
  w.set_string_array("tokenizer.ggml.merges", merges);
  w.set_u32("tokenizer.ggml.bos_token_id", 0);
  w.set_u32("tokenizer.ggml.eos_token_id", 1);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
  w.set_string("tokenizer.chat_template", "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}\n{% endfor %}");
  w.set_u8("zinc.test.u8", 200);
  w.set_i8("zinc.test.i8", -100);
  w.set_u16("zinc.test.u16", 60000);
  w.set_i16("zinc.test.i16", -30000);
  w.set_u64("zinc.test.u64", 1ull << 40);
  w.set_i64("zinc.test.i64", -(1ll << 40));
  w.set_f64("zinc.test.f64", 2.5);
  w.set_u8_array("zinc.test.u8_array", {1, 2, 3});
  w.set_i64_array("zinc.test.i64_array", {-1, 1ll << 50});
  w.set_f64_array("zinc.test.f64_array", {0.5, -0.25});

  w.add_tensor("token_embd.weight", DType::Q8_0, {256, 64});
  w.add_tensor("output_norm.weight", DType::F32, {256});
  w.add_tensor("blk.0.attn_q.weight", DType::Q4_K, {256, 256});
  w.add_tensor("blk.0.attn_k.weight", DType::Q6_K, {256, 128});
  w.add_tensor("blk.0.ffn_up.weight", DType::F16, {256, 8});
  w.add_tensor("blk.0.ffn_down.weight", DType::Q4_0, {64, 4, 2});
  return w;
}

inline std::vector<uint8_t> sample_gguf_bytes() {
  gguf::GgufWriter w = sample_writer();
  return w.write_memory([&](size_t i, uint8_t* dst) { fill_sample_tensor(w, i, dst); });
}

}  // namespace zinc::test
