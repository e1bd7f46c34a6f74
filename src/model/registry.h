// Architecture loaders, one per GGUF `general.architecture` family.
#pragma once

#include <memory>

#include "model/model.h"

namespace zinc {

std::unique_ptr<Model> load_qwen35(const gguf::GgufFile& file, Backend& backend);  // qwen35moe, qwen35
// Plain pre-norm transformers (transformer.cpp).
std::unique_ptr<Model> load_llama(const gguf::GgufFile& file, Backend& backend);
std::unique_ptr<Model> load_qwen3(const gguf::GgufFile& file, Backend& backend);
std::unique_ptr<Model> load_qwen3moe(const gguf::GgufFile& file, Backend& backend);
std::unique_ptr<Model> load_gemma3(const gguf::GgufFile& file, Backend& backend);  // gemma3.cpp
std::unique_ptr<Model> load_gpt_oss(const gguf::GgufFile& file, Backend& backend);  // gpt_oss.cpp

}  // namespace zinc
