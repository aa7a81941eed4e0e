// CUDA device probe: the first CUDA code in monet, compiled only when nvcc and cuDNN are found. It answers
// whether a usable GPU is present, so `--device cuda` fails with the real reason on machines without one.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

namespace monet::cuda {

// Empty string when a GPU and cuDNN are usable, else the reason.
std::string probe_device(std::string* description) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return std::string("no usable GPU (cudaGetDeviceCount: ") + cudaGetErrorString(err) + ")";
  if (count == 0) return "no GPU found";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "cannot read the properties of GPU 0";
  cudnnHandle_t handle = nullptr;
  cudnnStatus_t st = cudnnCreate(&handle);
  if (st != CUDNN_STATUS_SUCCESS) return std::string("cuDNN unusable: ") + cudnnGetErrorString(st);
  cudnnDestroy(handle);
  if (description)
    *description = std::string(prop.name) + ", cuDNN " + std::to_string(cudnnGetVersion()) + ", " +
                   std::to_string(prop.totalGlobalMem >> 20) + " MiB";
  return "";
}

}  // namespace monet::cuda
