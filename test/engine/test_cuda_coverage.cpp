// The CUDA backend's kernel table covers every op of the registry, and names no op the registry lacks. Needs no
// GPU (the table is plain data), so it runs - and can fail - on every machine whose build has CUDA.
#include <catch2/catch.hpp>

#ifdef MONET_HAVE_CUDA
#include <set>

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

TEST_CASE("without a usable GPU, --device cuda fails with the probe's reason", "[cuda]") {
  std::string description;
  const std::string problem = cuda::probe_device(&description);
  if (problem.empty()) {
    SUCCEED("a GPU is present: " << description);
    return;
  }
  try {
    make_backend("cuda");
    FAIL("make_backend(\"cuda\") succeeded without a GPU");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "--device cuda: " + problem);
  }
}
#endif
