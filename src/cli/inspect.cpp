// `zinc inspect FILE.gguf`: what a GGUF file holds - format facts, the model's
// hyper-parameters and tokenizer summary, then every tensor with its type, shape
// and size, and totals per type.
#include <cstdio>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "gguf/gguf.h"

namespace zinc::cli {
namespace {

struct InspectOptions {
  std::string path;
  bool metadata_only = false;
};

// Bytes in the largest binary unit that keeps the number at least 1.
std::string human_size(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

std::string padded(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string type_column(const gguf::Value& v) {
  if (!v.is_array()) return std::string(gguf::value_type_name(v.type()));
  return std::string(gguf::value_type_name(v.array_type())) + "[" + std::to_string(v.array_size()) + "]";
}

std::string dims_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// Metadata in four groups - general, the architecture's own keys, tokenizer, the
// rest - each in file order, keys and types in aligned columns.
void print_metadata(const gguf::GgufFile& file, const std::string& arch) {
  const std::vector<std::string> titles = {"general", arch.empty() ? "architecture" : arch, "tokenizer", "other"};
  auto group_of = [&](const std::string& key) -> size_t {
    if (starts_with(key, "general.")) return 0;
    if (!arch.empty() && starts_with(key, arch + ".")) return 1;
    if (starts_with(key, "tokenizer.")) return 2;
    return 3;
  };
  std::vector<std::vector<const gguf::Value*>> groups(titles.size());
  size_t key_width = 0, type_width = 0;
  for (const gguf::Value& v : file.metadata()) {
    const std::string& key = file.key_of(v);
    groups[group_of(key)].push_back(&v);
    key_width = std::max(key_width, key.size());
    type_width = std::max(type_width, type_column(v).size());
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].empty()) continue;
    std::printf("\n%s (%zu keys)\n", titles[g].c_str(), groups[g].size());
    for (const gguf::Value* v : groups[g])
      std::printf("  %s  %s  %s\n", padded(file.key_of(*v), key_width).c_str(),
                  padded(type_column(*v), type_width).c_str(), v->to_display(6).c_str());
  }
}

void print_tensors(const gguf::GgufFile& file) {
  const auto& tensors = file.tensors();
  size_t name_width = 4, type_width = 4, dims_width = 4;
  for (const auto& t : tensors) {
    name_width = std::max(name_width, t.name.size());
    type_width = std::max(type_width, type_name(t.type).size());
    dims_width = std::max(dims_width, dims_string(t.dims).size());
  }
  std::printf("\ntensors (%zu)\n", tensors.size());
  std::printf("  %s  %s  %s  %14s\n", padded("name", name_width).c_str(), padded("type", type_width).c_str(),
              padded("dims", dims_width).c_str(), "bytes");
  struct PerType {
    size_t count = 0;
    uint64_t bytes = 0;
  };
  std::map<uint32_t, PerType> per_type;  // keyed by type id, so totals print in GGML order
  uint64_t total = 0;
  for (const auto& t : tensors) {
    std::printf("  %s  %s  %s  %14zu\n", padded(t.name, name_width).c_str(),
                padded(std::string(type_name(t.type)), type_width).c_str(),
                padded(dims_string(t.dims), dims_width).c_str(), t.nbytes);
    PerType& p = per_type[static_cast<uint32_t>(t.type)];
    ++p.count;
    p.bytes += t.nbytes;
    total += t.nbytes;
  }
  std::printf("\ntotals\n  %zu tensors, %s of tensor data (%llu bytes)\n", tensors.size(), human_size(total).c_str(),
              static_cast<unsigned long long>(total));
  for (const auto& [id, p] : per_type)
    std::printf("  %s  %6zu tensors  %10s\n",
                padded(std::string(type_name(static_cast<DType>(id))), type_width).c_str(), p.count,
                human_size(p.bytes).c_str());
}

void run_inspect(const InspectOptions& opts) {
  auto file = gguf::GgufFile::open(opts.path);
  std::string arch = file->get_string_or("general.architecture", "");
  std::printf("file       %s (%s)\n", file->path().c_str(), human_size(file->file_size()).c_str());
  std::printf("version    %u\n", file->version());
  std::printf("alignment  %zu\n", file->alignment());
  std::printf("arch       %s\n", arch.empty() ? "(general.architecture missing)" : arch.c_str());
  print_metadata(*file, arch);
  if (!opts.metadata_only) print_tensors(*file);
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto opts = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show a GGUF file's metadata and tensors");
  cmd->add_option("file", opts->path, "GGUF file")->required();
  cmd->add_flag("--metadata-only", opts->metadata_only, "Leave out the tensor table");
  cmd->callback([opts] { run_inspect(*opts); });
}

}  // namespace zinc::cli
