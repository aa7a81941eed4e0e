// The CUDA backend's public face (host code only): its construction, the op names its kernel table covers (a
// question that needs no GPU), the device probe, and per-algorithm timing of convolutions and batch norm for profiles.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/backend.h"

namespace monet::cuda {

// Empty when a GPU and cuDNN are usable, else the reason (device_probe.cu).
std::string probe_device(std::string* description);

// math: "default" (TF32 allowed in cuDNN convolutions, cuBLAS full fp32, as PyTorch by default) or "fp32".
// Throws the probe's reason when no GPU is usable.
std::unique_ptr<Backend> make_cuda_backend(const std::string& math);

// Every op name the kernel table has a kernel for, sorted.
std::vector<std::string> kernel_op_names();

// The ops that run on cuDNN's convolutions, each with its algorithms (cuda_conv.cpp).
bool is_cudnn_conv(const std::string& op);

// For a Conv-family node of g: every cuDNN algorithm for its problem with its workspace, status, determinism
// and, where it runs, its time (median of `repeats` after `warmup`, CUDA events), on inputs of the node's shapes
// filled with a fixed pattern. Scratch memory for this comes from one cudaMalloc made and freed here (profiling
// runs outside training steps); an algorithm whose workspace does not fit is recorded as failed, not fatal.
// Returns [] for other ops. backend must be a CUDA backend.
nlohmann::json time_conv_algorithms(Backend& backend, const Graph& g, const Node& n, int warmup, int repeats);

// Whether an op's nodes have backend algorithms to time: the convolutions' cuDNN algorithms; BatchNormalization's
// and BatchNormGrad's cuDNN (0, the default) and our kernels (kOwnAlgorithm, schedule/plan.h).
bool offers_algorithms(const std::string& op);

// For a node of an op that offers_algorithms: each algorithm with its workspace, status, determinism and, where it
// runs, its time, as time_conv_algorithms lists them (batch norm: both run through the backend on inputs of the
// node's shapes in one cudaMalloc made and freed here; both deterministic). [] for other ops.
nlohmann::json time_algorithms(Backend& backend, const Graph& g, const Node& n, int warmup, int repeats);

// The host link of GPU 0 (cuda_host_link.cpp): `bytes`-byte copies between pinned host memory and the device on a
// stream of their own, the median of `repeats` after two warm-ups, each direction alone and while a kernel streams
// through device memory on another stream; latency: the median 4 KiB host-to-device copy. Throws naming the CUDA
// call that failed (a pinned allocation the host refuses, among others).
struct LinkFigures {
  double h2d_gbs = 0, d2h_gbs = 0, h2d_busy_gbs = 0, d2h_busy_gbs = 0, latency_us = 0;
};
LinkFigures measure_host_link(int64_t bytes, int repeats);

}  // namespace monet::cuda
