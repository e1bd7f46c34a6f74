// A CUPTI injection library that records when every kernel ran, without touching
// the program: the kernels' own start and end times on the GPU, PDL overlap and
// graph replays included (ncu serializes kernels; Nsight Systems cannot make reports
// on the GPU machine). CMake builds it as libzinc_kernel_trace.so where CUPTI is
// found; by hand: g++ -std=c++17 -O2 -shared -fPIC tools/kernel_trace.cpp -lcupti
// with CUDA's include and library folders. Use (tools/kernel_timeline.py reads it):
//
//   CUDA_INJECTION64_PATH=build/libzinc_kernel_trace.so KERNEL_TRACE_OUT=t.txt build/zinc bench -m F -p 0 -n 128
//   tools/kernel_timeline.py t.txt --layer-kernels
//
// Each line of the output: start end graph_node_id name (nanoseconds, GPU clock), then for
// a kernel its launch: grid=X,Y,Z block=X,Y,Z regs=<per thread> smem=<static + dynamic
// bytes a block> carve=<shared memory an SM was configured with> cluster=<blocks, 0 or 1 without>
// (kernel_timeline.py --occupancy). A copy's name is memcpy:<kind>:<bytes>.
#include <cupti.h>

#include <cstdio>
#include <cstdlib>

namespace {

FILE* out = nullptr;

const char* copy_kind(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    default: return "other";
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = size_t{16} << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      std::fprintf(out, "%llu %llu %llu %s grid=%d,%d,%d block=%d,%d,%d regs=%u smem=%d carve=%u cluster=%u\n",
                   static_cast<unsigned long long>(k->start), static_cast<unsigned long long>(k->end),
                   static_cast<unsigned long long>(k->graphNodeId), k->name, k->gridX, k->gridY, k->gridZ, k->blockX,
                   k->blockY, k->blockZ, static_cast<unsigned>(k->registersPerThread),
                   k->staticSharedMemory + k->dynamicSharedMemory, k->sharedMemoryExecuted,
                   k->clusterX * k->clusterY * k->clusterZ);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      std::fprintf(out, "%llu %llu %llu memcpy:%s:%llu\n", static_cast<unsigned long long>(m->start),
                   static_cast<unsigned long long>(m->end), static_cast<unsigned long long>(m->graphNodeId),
                   copy_kind(m->copyKind), static_cast<unsigned long long>(m->bytes));
    }
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  if (dropped) std::fprintf(stderr, "kernel_trace: %zu records dropped\n", dropped);
  std::free(buffer);
}

void finish() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (out) std::fclose(out);
}

}  // namespace

extern "C" int InitializeInjection() {
  const char* path = std::getenv("KERNEL_TRACE_OUT");
  out = std::fopen(path ? path : "kernel_trace.txt", "w");
  if (!out) return 0;
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel_trace: could not enable CUPTI kernel and copy records\n");
    return 0;
  }
  std::atexit(finish);
  return 1;
}
