// Peak copy bandwidths of this machine, measured the way the training copies data: cudaMemcpyAsync on a non-default
// stream timed with CUDA events. Prints one line per path, "name GB/s" (1 GB = 1e9 bytes), for bench/device_check.sh:
//   h2d_pinned, h2d_pageable, d2h_pinned, d2d (a device-to-device copy moves 2x bytes through memory: read + write;
//   the figure is bytes copied per second, as cudaMemcpy reports it).
// Usage: gpu_peaks [MiB=256] [repeats=10]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CHECK(x)                                                                      \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "gpu_peaks: %s failed: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

static double time_copies(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, int reps, cudaStream_t s) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s));  // warm-up
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaEventRecord(a, s));
  for (int i = 0; i < reps; ++i) CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s));
  CHECK(cudaEventRecord(b, s));
  CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return static_cast<double>(bytes) * reps / (ms * 1e-3) / 1e9;
}

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 256;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 10;
  const size_t bytes = mib << 20;
  int dev = 0;
  CHECK(cudaSetDevice(dev));
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, dev));
  std::printf("device %s cc %d.%d\n", p.name, p.major, p.minor);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void *d0 = nullptr, *d1 = nullptr, *pinned = nullptr;
  CHECK(cudaMalloc(&d0, bytes));
  CHECK(cudaMalloc(&d1, bytes));
  CHECK(cudaMallocHost(&pinned, bytes));
  void* pageable = std::malloc(bytes);
  if (!pageable) return 1;
  std::memset(pinned, 1, bytes);
  std::memset(pageable, 1, bytes);
  std::printf("h2d_pinned %.2f\n", time_copies(d0, pinned, bytes, cudaMemcpyHostToDevice, reps, s));
  std::printf("h2d_pageable %.2f\n", time_copies(d0, pageable, bytes, cudaMemcpyHostToDevice, reps, s));
  std::printf("d2h_pinned %.2f\n", time_copies(pinned, d0, bytes, cudaMemcpyDeviceToHost, reps, s));
  std::printf("d2d %.2f\n", time_copies(d1, d0, bytes, cudaMemcpyDeviceToDevice, reps, s));
  std::free(pageable);
  CHECK(cudaFreeHost(pinned));
  CHECK(cudaFree(d0));
  CHECK(cudaFree(d1));
  CHECK(cudaStreamDestroy(s));
  return 0;
}
