// Fuzzes checkpoint opening through the index file: the fuzz input is model.safetensors.index.json
// beside one small valid shard; Checkpoint::open must reject or accept, never crash or hang.
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

#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/safetensors/shard_writer.h"

namespace {
std::filesystem::path setup() {
  auto dir = std::filesystem::temp_directory_path() / ("fp4forge-fuzz-index-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  static const std::filesystem::path to_remove = dir;
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(to_remove, ec);
  });
  std::vector<std::pair<fp4forge::st::OutTensor, std::vector<std::byte>>> t;
  t.push_back({{"model.embed_tokens.weight", fp4forge::DType::BF16, {2, 2}}, std::vector<std::byte>(8)});
  t.push_back({{"lm_head.weight", fp4forge::DType::BF16, {2, 2}}, std::vector<std::byte>(8)});
  if (!fp4forge::st::write_safetensors(dir / "model-00001-of-00001.safetensors", t).ok()) __builtin_trap();
  std::ofstream(dir / "config.json") << R"({"architectures":["LlamaForCausalLM"],"model_type":"llama"})";
  return dir;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path dir = setup();
  {
    std::ofstream f(dir / "model.safetensors.index.json", std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto c = fp4forge::Checkpoint::open(dir);
  (void)c;
  return 0;
}
