// The CUDA backend's checks against the CPU backend live in `zinc gpu-check` (so
// they also run on the GPU machine, which has no GoogleTest); this test runs that
// command when a GPU is present and skips otherwise.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "test_util.h"

namespace zinc {
namespace {

TEST(CudaBackend, MatchesTheCpuBackend) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  const std::string cmd = test::zinc_binary() + " gpu-check --quiet --dir " + test::temp_dir();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(CudaBackend, DeviceCountNeverThrows) { EXPECT_GE(cuda_device_count(), 0); }

}  // namespace
}  // namespace zinc
