#pragma once
/**
 * GPUs a plan places seats on: `--gpu ID=TOTAL[:used=SIZE][:name=NAME][:reserved=SIZE|:torch_total=SIZE][:headroom=SIZE]`
 * or nvidia-smi's CSV. TOTAL is nvidia-smi's memory.total; vLLM sees less: torch's total
 * (cudaMemGetInfo) leaves out what the driver reserves, and util * that total is the seat's budget.
 */
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp4forge/core/error.h"

namespace fp4forge::kvplan {

/** Free memory plan keeps on each GPU unless told otherwise (docs/cli/plan.md, "Placement"). */
inline constexpr std::uint64_t kDefaultHeadroom = 1ull << 30;

struct GpuSpec {
  std::string id;               ///< as given ("0", "1", a UUID...); used for docker device_ids
  std::string name;             ///< product name when known ("NVIDIA H200"); decides the A100 rule
  std::uint64_t total_bytes = 0;
  std::uint64_t used_bytes = 0;  ///< held by other tenants (other processes)
  std::uint64_t reserved_bytes = 0;  ///< driver-reserved: TOTAL - torch's total
  std::string reserved_source;       ///< "given", "torch_total given", "measured on <card>", "default estimate"
  /** Free memory placement keeps on this GPU (the key headroom=, else --headroom, else kDefaultHeadroom): no seat is
   * placed into it, and chosen utilizations leave it free. */
  std::uint64_t headroom_bytes = kDefaultHeadroom;
  bool headroom_given = false;       ///< the key headroom= (else --headroom or the default applies)
  /** unified: memory shared with the host (DGX Spark / GB10, Jetson Thor): no driver reserve by default, and
   * the free memory vLLM sees at boot (free=) stays well below the total. */
  bool unified = false;
  /** free=SIZE: what cudaMemGetInfo calls free before any seat starts (torch.cuda.mem_get_info()[0]). */
  std::optional<std::uint64_t> free_given;
  /** The total vLLM multiplies gpu_memory_utilization by. */
  std::uint64_t torch_total() const noexcept { return total_bytes - reserved_bytes; }
  /** What cudaMemGetInfo calls free before any seat starts: the torch total less other tenants, or free=. */
  std::uint64_t torch_free() const noexcept {
    const std::uint64_t f = torch_total() > used_bytes ? torch_total() - used_bytes : 0;
    return free_given ? std::min(f, *free_given) : f;
  }
};

/** The driver reserve fp4forge assumes for a card: TOTAL minus the total torch reports, from the totals
 * PyTorch and vLLM print for common cards (docs/plan-overheads.md), else kDefaultDriverReserve. Sets
 * `source` to say which. */
std::uint64_t driver_reserved_bytes(std::uint64_t total_bytes, std::string_view name, std::string* source = nullptr);
/** For a name that is a measured card's but a TOTAL more than 1 % off its nvidia-smi figure: what that card's total
 * is and how to write it (GB is decimal); "" otherwise. */
std::string card_total_hint(std::uint64_t total_bytes, std::string_view name);
/** The reserve assumed for a card not in the table (about 0.6 GiB on 96 and 141 GB cards), at most a tenth of a
 * small card's total (inferred: the measured reserves, 0.3 - 0.9 GiB, are 0.5 - 1.5 % of 22 - 140 GiB cards). */
inline constexpr std::uint64_t kDefaultDriverReserve = 614ull << 20;
/** GpuSpec::reserved_source of that assumption (--json `reserved_source`). */
inline constexpr std::string_view kReserveDefaultEstimate = "default estimate";

/**
 * Parses `ID=TOTAL[:used=SIZE][:name=NAME][:reserved=SIZE|:torch_total=SIZE][:headroom=SIZE][:unified][:free=SIZE]`,
 * e.g. `0=96GiB:used=41GiB` or `spark=119.7GiB:unified:free=80GiB`.
 * Without reserved= / torch_total= the reserve is driver_reserved_bytes(TOTAL, NAME). USAGE error (exit 2)
 * on bad syntax, an unknown key, used > torch total, a reserve >= TOTAL or a zero total.
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
