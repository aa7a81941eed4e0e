#include "core/npy.h"

#include <cstring>
#include <fstream>

#include "core/error.h"

namespace monet::npy {

void write(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
           const void* data, int64_t bytes) {
  std::string shape_text = "(";
  for (int64_t d : shape) shape_text += std::to_string(d) + ",";
  shape_text += ")";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape_text + ", }";
  // magic(6) + version(2) + header_len(2) + header, padded with spaces to a multiple of 64, ending in '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) fail(path, ": cannot open for writing");
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = static_cast<uint16_t>(header.size());
  char len_le[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(len_le, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(static_cast<const char*>(data), bytes);
  if (!out) fail(path, ": write failed");
}

static std::string field(const std::string& header, const std::string& key) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) return "";
  size_t colon = header.find(':', k);
  return colon == std::string::npos ? "" : header.substr(colon + 1);
}

int64_t item_bytes(const std::string& descr) {
  if (descr == "<f8" || descr == "<i8") return 8;
  if (descr == "<f4" || descr == "<i4") return 4;
  if (descr == "|u1" || descr == "|b1") return 1;
  return 0;
}

Array read(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail(path, ": cannot open");
  const int64_t file_bytes = static_cast<int64_t>(in.tellg());
  in.seekg(0);
  char magic[10];
  in.read(magic, 10);
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0) fail(path, ": not a .npy file");
  uint32_t len = static_cast<uint8_t>(magic[8]) | (static_cast<uint8_t>(magic[9]) << 8);
  int64_t data_start = 10 + len;
  if (magic[6] != 1) {  // version 2/3: 4-byte header length
    char more[2];
    in.read(more, 2);
    len |= (static_cast<uint32_t>(static_cast<uint8_t>(more[0])) << 16) |
           (static_cast<uint32_t>(static_cast<uint8_t>(more[1])) << 24);
    data_start = 12 + static_cast<int64_t>(len);
  }
  if (!in || data_start > file_bytes) fail(path, ": truncated .npy header");
  std::string header(len, '\0');
  in.read(header.data(), len);
  if (!in) fail(path, ": truncated .npy header");
  Array a;
  const std::string d = field(header, "descr");
  const size_t q1 = d.find('\''), q2 = q1 == std::string::npos ? q1 : d.find('\'', q1 + 1);
  if (q2 == std::string::npos) fail(path, ": .npy header has no dtype ('descr')");
  a.descr = d.substr(q1 + 1, q2 - q1 - 1);
  if (field(header, "fortran_order").find("True") < 8) fail(path, ": fortran order not supported");
  std::string s = field(header, "shape");
  const size_t open = s.find('('), close = s.find(')');
  if (open == std::string::npos || close == std::string::npos || close < open)
    fail(path, ": .npy header has no shape");
  s = s.substr(open + 1, close - open - 1);
  const int64_t item = item_bytes(a.descr);
  if (item == 0) fail(path, ": unsupported dtype ", a.descr, " (expected <f4, <f8, <i4, <i8, |u1 or |b1)");
  const int64_t available = (file_bytes - data_start) / item;
  int64_t numel = 1;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    std::string tok = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (tok.find_first_not_of(" ") != std::string::npos) {
      size_t used = 0;
      int64_t dim = -1;
      try {
        dim = std::stoll(tok, &used);
      } catch (const std::exception&) {
      }
      if (dim < 0 || tok.find_first_not_of(" ", used) != std::string::npos)
        fail(path, ": .npy shape entry '", tok, "' is not a size");
      a.shape.push_back(dim);
      if (dim > 0 && numel > available / dim) fail(path, ": truncated .npy data (its shape needs more than the file holds)");
      numel *= dim;
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (numel > available) fail(path, ": truncated .npy data (its shape needs more than the file holds)");
  a.bytes.resize(static_cast<size_t>(numel * item));
  in.read(a.bytes.data(), static_cast<std::streamsize>(a.bytes.size()));
  if (!in) fail(path, ": truncated .npy data");
  return a;
}

bool is_float(const Array& a) { return a.descr == "<f4" || a.descr == "<f8"; }

std::vector<double> as_doubles(const Array& a) {
  if (!is_float(a)) fail("npy: expected a float array, got ", a.descr);
  return as_values(a);
}

template <class T>
static std::vector<double> widen(const Array& a) {
  std::vector<double> out(a.bytes.size() / sizeof(T));
  for (size_t i = 0; i < out.size(); ++i) {
    T x;
    std::memcpy(&x, a.bytes.data() + i * sizeof(T), sizeof(T));
    out[i] = static_cast<double>(x);
  }
  return out;
}

std::vector<double> as_values(const Array& a) {
  if (a.descr == "<f4") return widen<float>(a);
  if (a.descr == "<f8") return widen<double>(a);
  if (a.descr == "<i4") return widen<int32_t>(a);
  if (a.descr == "<i8") return widen<int64_t>(a);
  if (a.descr == "|u1" || a.descr == "|b1") return widen<uint8_t>(a);
  fail("npy: unsupported dtype ", a.descr);
}

}  // namespace monet::npy
