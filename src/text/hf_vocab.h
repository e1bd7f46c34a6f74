// Hugging Face tokenizer.json (+ tokenizer_config.json) -> GGUF tokenizer metadata,
// following llama.cpp's convert_hf_to_gguf.py key conventions.
//
// Byte-level BPE vocabularies become tokenizer.ggml.model "gpt2" with the
// pre-tokenizer name recognised from the tokenizer.json regex. SentencePiece-style
// BPE vocabularies (byte_fallback, spaces replaced by U+2581, e.g. Gemma 3) become
// "llama" with their merges and scores of -id (sentencepiece orders pieces by score);
// zinc merges by rank when merges are present, which is exactly HF's algorithm.
#pragma once

#include <string>

#include "gguf/gguf.h"

namespace zinc::text {

// Adds the tokenizer.* keys read from a directory holding tokenizer.json and,
// optionally, tokenizer_config.json. Throws std::runtime_error on what it cannot map.
void add_hf_vocab(const std::string& hf_dir, gguf::GgufWriter& writer);

// A vocab-only GGUF (metadata, no tensors) at out_path.
void write_hf_vocab_gguf(const std::string& hf_dir, const std::string& out_path);

}  // namespace zinc::text
