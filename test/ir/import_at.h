// ImportOptions at a batch size, the rest default: the import tests' common case.
#pragma once

#include "ir/onnx_import.h"

namespace monet::test {

inline ImportOptions at(int64_t batch) {
  ImportOptions o;
  o.batch = batch;
  return o;
}

}  // namespace monet::test
