#include "model/registry.h"

#include <stdexcept>
#include <string>
#include <string_view>

#include "gguf/gguf.h"

namespace zinc {

namespace {
struct Arch {
  std::string_view name;
  std::unique_ptr<Model> (*load)(const gguf::GgufFile&, Backend&);
};
constexpr Arch kArchitectures[] = {
    {"qwen35moe", load_qwen35},
    {"qwen35", load_qwen35},
    {"llama", load_llama},
    {"qwen3", load_qwen3},
    {"qwen3moe", load_qwen3moe},
    {"gemma3", load_gemma3},
    {"gpt-oss", load_gpt_oss},
};
}  // namespace

std::unique_ptr<Model> load_model(const gguf::GgufFile& file, Backend& backend) {
  const std::string arch = file.architecture();
  for (const Arch& a : kArchitectures)
    if (a.name == arch) return a.load(file, backend);
  std::string known;
  for (const Arch& a : kArchitectures) known += (known.empty() ? "" : ", ") + std::string(a.name);
  throw std::runtime_error(file.path() + ": unsupported architecture '" + arch + "' (zinc supports " + known + ")");
}

}  // namespace zinc
