#include "text/o200k_tiny.h"

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "gguf/gguf.h"
#include "test_util.h"
#include "text/hf_vocab.h"

namespace zinc::test {

const text::Tokenizer& o200k_tiny() {
  struct Loaded {
    std::unique_ptr<gguf::GgufFile> file;  // the tokenizer reads its vocabulary from here
    std::unique_ptr<text::Tokenizer> tokenizer;
  };
  static const Loaded loaded = [] {
    namespace fs = std::filesystem;
    const fs::path src = fs::path(source_dir()) / "tests/data/text/o200k-tiny";
    const fs::path dir = fs::path(temp_dir()) / "o200k_tiny";
    fs::create_directories(dir);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
      const std::string cmd =
          "xz -dc '" + (src / (std::string(f) + ".xz")).string() + "' > '" + (dir / f).string() + "'";
      if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
    }
    text::write_hf_vocab_gguf(dir.string(), (dir / "vocab.gguf").string());
    Loaded l;
    l.file = gguf::GgufFile::open((dir / "vocab.gguf").string());
    l.tokenizer = text::Tokenizer::from_gguf(*l.file);
    return l;
  }();
  return *loaded.tokenizer;
}

}  // namespace zinc::test
