#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>

#include "test_util.h"

namespace zinc::test {
namespace {
// Never destroyed, so the atexit cleanup can still read it.
const std::string* g_temp_dir = nullptr;
void remove_temp_dir() {
  std::error_code ec;
  std::filesystem::remove_all(*g_temp_dir, ec);
}
}  // namespace

std::string temp_dir() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "zinc_test_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) std::abort();
    g_temp_dir = new std::string(tmpl);
    std::atexit(remove_temp_dir);
  });
  return *g_temp_dir;
}

}  // namespace zinc::test

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
