#pragma once
/** GPUs a plan places seats on: `--gpu ID=TOTAL[:used=SIZE][:name=NAME]` or nvidia-smi's CSV. */
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fp4forge/core/error.h"

namespace fp4forge::kvplan {

struct GpuSpec {
  std::string id;               ///< as given ("0", "1", a UUID...); used for docker device_ids
  std::string name;             ///< product name when known ("NVIDIA H200"); decides the A100 rule
  std::uint64_t total_bytes = 0;
  std::uint64_t used_bytes = 0;  ///< held by other tenants (other processes)
};

/**
 * Parses `ID=TOTAL[:used=SIZE][:name=NAME]`, e.g. `0=96GiB:used=41GiB`. USAGE error (exit 2) on bad
 * syntax, an unknown key, used > total or a zero total.
 */
Result<GpuSpec> parse_gpu_arg(std::string_view text);

/**
 * Parses the output of `nvidia-smi --query-gpu=index,name,memory.total,memory.used
 * --format=csv,noheader,nounits` (MiB values). BAD_INPUT on malformed lines.
 */
Result<std::vector<GpuSpec>> parse_nvidia_smi_csv(std::string_view csv);

/** The nvidia-smi command line query_nvidia_smi() runs. */
inline constexpr const char* kNvidiaSmiQuery =
    "nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv,noheader,nounits";

/** Runs kNvidiaSmiQuery. IO error when nvidia-smi is missing or fails. */
Result<std::vector<GpuSpec>> query_nvidia_smi();

}  // namespace fp4forge::kvplan
