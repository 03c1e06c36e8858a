#pragma once
// Helpers shared by the safetensors tests (header-only; each test is its own program).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "temp_dir.h"

namespace fp4forge::testutil {

inline std::vector<std::byte> to_bytes(std::string_view s) {
  std::vector<std::byte> out(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) out[i] = static_cast<std::byte>(s[i]);
  return out;
}

inline void put_le64(std::vector<std::byte>& out, std::uint64_t n) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>((n >> (8 * i)) & 0xff));
}

/** A safetensors file: length prefix = json.size() (no padding), the JSON, then `data_bytes` bytes. */
inline std::vector<std::byte> st_file(std::string_view json, std::size_t data_bytes, std::byte fill = std::byte{0}) {
  std::vector<std::byte> out;
  put_le64(out, json.size());
  auto j = to_bytes(json);
  out.insert(out.end(), j.begin(), j.end());
  out.insert(out.end(), data_bytes, fill);
  return out;
}

/** A file with an arbitrary length prefix followed by `rest`. */
inline std::vector<std::byte> raw_file(std::uint64_t len, std::string_view rest) {
  std::vector<std::byte> out;
  put_le64(out, len);
  auto j = to_bytes(rest);
  out.insert(out.end(), j.begin(), j.end());
  return out;
}

inline void write_bytes(const std::filesystem::path& p, const std::vector<std::byte>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

inline void write_text(const std::filesystem::path& p, std::string_view s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(s.data(), static_cast<std::streamsize>(s.size()));
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary | std::ios::ate);
  if (!f) return {};
  std::string s(static_cast<std::size_t>(f.tellg()), '\0');
  f.seekg(0);
  f.read(s.data(), static_cast<std::streamsize>(s.size()));
  return s;
}

/** Names of the entries of a directory, sorted. */
inline std::vector<std::string> list_dir(const std::filesystem::path& d) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(d)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace fp4forge::testutil
