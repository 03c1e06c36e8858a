// Fuzzes the reading of a server's Prometheus text (the kv check's /metrics): prometheus_samples must skip what does
// not parse, never crash, hang or return more than it was asked for.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fp4forge/probe/kv_pool.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto samples = fp4forge::probe::prometheus_samples(text, "vllm:cache_config_info", 8);
  if (samples.size() > 8) std::abort();
  for (const auto& s : samples) (void)s.label("num_gpu_blocks");
  return 0;
}
