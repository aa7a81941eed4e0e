// Minimal .npy (NumPy format 1.0) reading and writing, used to exchange tensors with the PyTorch reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace monet::npy {

struct Array {
  std::string descr;            // '<f4', '<f8', '<i4', '<i8', '|u1', '|b1'
  std::vector<int64_t> shape;
  std::vector<char> bytes;      // raw little-endian data, C order
};

void write(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
           const void* data, int64_t bytes);
// Any file: a malformed header, a dtype not listed above or data shorter than its shape gets an error naming the
// file (user files come in through --input).
Array read(const std::string& path);

bool is_float(const Array& a);

// Element values of a float array ('<f4' or '<f8') as double.
std::vector<double> as_doubles(const Array& a);
// Element values of any array as double (integers exactly up to 2^53; bool as 0/1).
std::vector<double> as_values(const Array& a);

}  // namespace monet::npy
