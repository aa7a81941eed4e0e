// lib/engine/cuda/cuda_gather_elements_kernels.cu compiled as C++ against this folder's stand-in for cuda_runtime.h
// (its launchers run the grids on the CPU, emu.h); the tests call it through engine/cuda/kernels.h.
#include "engine/cuda/cuda_gather_elements_kernels.cu"
