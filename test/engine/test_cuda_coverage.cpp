// The CUDA backend's kernel table covers every op of the registry, and names no op the registry lacks. Needs no
// GPU (the table is plain data), so it runs - and can fail - on every machine whose build has CUDA. Beside it,
// --device cuda: without a usable GPU it fails with the probe's reason; with one, the backend is made and moves
// values through device memory and a kernel unchanged (the full CUDA tests: test/cuda/, monet_cuda_tests).
#include <catch2/catch.hpp>

#ifdef MONET_HAVE_CUDA
#include <set>

#include "core/error.h"
#include "engine/backend.h"
#include "engine/cuda/cuda_backend.h"
#include "ops/op.h"

using namespace monet;

TEST_CASE("the CUDA kernel table covers every registry op", "[cuda]") {
  const std::vector<std::string> names = cuda::kernel_op_names();
  const std::set<std::string> cuda_ops(names.begin(), names.end());
  std::set<std::string> missing, registry;
  for (const OpDef* d : all_ops()) {
    registry.insert(std::string(d->name));
    if (!cuda_ops.count(std::string(d->name))) missing.insert(std::string(d->name));
  }
  INFO("registry ops without a CUDA kernel: " << missing.size());
  for (const std::string& m : missing) UNSCOPED_INFO(m);
  CHECK(missing.empty());
  for (const std::string& n : cuda_ops) {
    INFO("CUDA kernel for an op the registry does not have: " << n);
    CHECK(registry.count(n) == 1);
  }
  CHECK(cuda_ops.size() == registry.size());
}

TEST_CASE("the CUDA device: the probe's reason without a usable GPU, a working backend with one", "[cuda]") {
  std::string description;
  const std::string problem = cuda::probe_device(&description);
  if (!problem.empty()) {
    try {
      make_backend("cuda");
      FAIL("make_backend(\"cuda\") succeeded without a GPU");
    } catch (const Error& e) {
      CHECK(std::string(e.what()) == "--device cuda: " + problem);
    }
    return;
  }
  // A GPU: the probe describes it ("<name>, cuDNN <version>, <MiB> MiB") and both math modes make a backend that
  // names itself and that device.
  INFO("GPU: " << description);
  const std::string gpu = description.substr(0, description.find(", cuDNN "));
  REQUIRE_FALSE(gpu.empty());
  CHECK(make_backend("cuda")->name() == "cuda");
  std::unique_ptr<Backend> b = make_backend("cuda", "fp32");
  CHECK(b->name() == "cuda-fp32");
  CHECK(b->float_bytes() == 4);
  CHECK_THAT(b->describe(), Catch::StartsWith(gpu + " (sm_"));
  CHECK_THROWS_AS(make_backend("cuda", "tf64"), Error);

  // Values through device memory: one block (the arena's one cudaMalloc), an f32, an i64 and a u8 tensor in it,
  // uploaded and downloaded bit for bit (each value exact in its type).
  const Shape four = {4};
  char* block = static_cast<char*>(b->reserve(3 * kAlignBytes));
  REQUIRE(block != nullptr);
  const TensorRef f{block, &four, DType::f32}, i{block + kAlignBytes, &four, DType::i64},
      u{block + 2 * kAlignBytes, &four, DType::u8};
  const std::vector<double> iv = {-7, 0, 1LL << 40, 12345}, uv = {0, 1, 200, 255};
  b->upload(f, {1.5, -2.25, 0.0078125, static_cast<float>(3e38)});
  b->upload(i, iv);
  b->upload(u, uv);
  CHECK(b->download(f) == std::vector<double>{1.5, -2.25, 0.0078125, static_cast<float>(3e38)});
  CHECK(b->download(i) == iv);
  CHECK(b->download(u) == uv);

  // A kernel: Relu of the four f32 values into the i64 tensor's memory (y = max(x, 0), exact), its mask (bit k of
  // the first 32-bit little-endian word for element k: 0b1101) into the u8 tensor's.
  Graph g;
  const int x = g.add_value({.name = "x", .shape = four});
  const int y = g.add_value({.name = "y", .shape = four});
  const int m = g.add_value({.name = "mask", .shape = four, .dtype = DType::u8});
  const Node relu{.name = "relu", .op = "Relu", .inputs = {x}, .outputs = {y, m}};
  const TensorRef out{block + kAlignBytes, &four, DType::f32};
  REQUIRE(b->workspace_bytes(g, relu) == 0);
  b->run(g, relu, {f}, {out, u}, nullptr, 0, false);
  b->synchronize();
  CHECK(b->download(out) == std::vector<double>{1.5, 0, 0.0078125, static_cast<float>(3e38)});
  CHECK(b->download(u) == std::vector<double>{13, 0, 0, 0});
  CHECK(b->download(f) == std::vector<double>{1.5, -2.25, 0.0078125, static_cast<float>(3e38)});  // input unchanged
  b->unreserve(block);
}
#endif
