// A whole file's bytes, for the commands that take a text file (templates, prompts,
// perplexity's text, messages).
#pragma once

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace zinc::cli {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace zinc::cli
