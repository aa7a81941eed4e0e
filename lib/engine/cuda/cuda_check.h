// Every CUDA runtime, cuDNN and cuBLAS call of the CUDA backend goes through one of these macros: a failure
// throws monet::Error naming the source file and line, the call, and the library's status string.
// Host code only (C++20 .cpp files); the .cu launchers return cudaError_t for the caller to check.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "core/error.h"

namespace monet::cuda {

[[noreturn]] inline void throw_status(const char* lib, const char* status, const char* call, const char* file,
                                      int line) {
  fail(file, ":", line, ": ", lib, " call ", call, " failed: ", status);
}

inline void check(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess)
    throw_status("CUDA", (std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")").c_str(), call, file,
                 line);
}
inline void check(cudnnStatus_t s, const char* call, const char* file, int line) {
  if (s != CUDNN_STATUS_SUCCESS) throw_status("cuDNN", cudnnGetErrorString(s), call, file, line);
}
inline void check(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw_status("cuBLAS", (std::string(cublasGetStatusName(s)) + " (" + cublasGetStatusString(s) + ")").c_str(), call,
                 file, line);
}

}  // namespace monet::cuda

#define MONET_CUDA_CHECK(call) ::monet::cuda::check((call), #call, __FILE__, __LINE__)
#define MONET_CUDNN_CHECK(call) ::monet::cuda::check((call), #call, __FILE__, __LINE__)
#define MONET_CUBLAS_CHECK(call) ::monet::cuda::check((call), #call, __FILE__, __LINE__)
