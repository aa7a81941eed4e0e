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
  return header.substr(colon + 1);
}

Array read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open");
  char magic[10];
  in.read(magic, 10);
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0) fail(path, ": not a .npy file");
  uint32_t len = static_cast<uint8_t>(magic[8]) | (static_cast<uint8_t>(magic[9]) << 8);
  if (magic[6] != 1) {  // version 2/3: 4-byte header length
    char more[2];
    in.read(more, 2);
    len |= (static_cast<uint32_t>(static_cast<uint8_t>(more[0])) << 16) |
           (static_cast<uint32_t>(static_cast<uint8_t>(more[1])) << 24);
  }
  std::string header(len, '\0');
  in.read(header.data(), len);
  Array a;
  std::string d = field(header, "descr");
  size_t q1 = d.find('\''), q2 = d.find('\'', q1 + 1);
  a.descr = d.substr(q1 + 1, q2 - q1 - 1);
  if (field(header, "fortran_order").find("True") < 8) fail(path, ": fortran order not supported");
  std::string s = field(header, "shape");
  s = s.substr(s.find('(') + 1, s.find(')') - s.find('(') - 1);
  int64_t numel = 1;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    std::string tok = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (tok.find_first_of("0123456789") != std::string::npos) {
      a.shape.push_back(std::stoll(tok));
      numel *= a.shape.back();
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  int64_t item = a.descr == "<f4" ? 4 : a.descr == "<f8" ? 8 : a.descr == "<i8" ? 8 : a.descr == "|u1" || a.descr == "|b1" ? 1 : 0;
  if (item == 0) fail(path, ": unsupported dtype ", a.descr);
  a.bytes.resize(static_cast<size_t>(numel * item));
  in.read(a.bytes.data(), static_cast<std::streamsize>(a.bytes.size()));
  if (!in) fail(path, ": truncated .npy data");
  return a;
}

std::vector<double> as_doubles(const Array& a) {
  std::vector<double> out;
  if (a.descr == "<f4") {
    out.resize(a.bytes.size() / 4);
    const float* p = reinterpret_cast<const float*>(a.bytes.data());
    for (size_t i = 0; i < out.size(); ++i) out[i] = p[i];
  } else if (a.descr == "<f8") {
    out.resize(a.bytes.size() / 8);
    std::memcpy(out.data(), a.bytes.data(), a.bytes.size());
  } else {
    fail("npy: expected a float array, got ", a.descr);
  }
  return out;
}

}  // namespace monet::npy
