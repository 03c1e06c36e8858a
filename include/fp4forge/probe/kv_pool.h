#pragma once
/**
 * The served KV pool (`probe --checks kv`): vLLM's Prometheus `/metrics` read as untrusted text, and the pool a
 * `plan --json` file expects for a seat.
 *
 * vLLM exports its CacheConfig as an info-style gauge, `vllm:cache_config_info{...} 1.0`, one label per
 * CacheConfig field, each the Python `str()` of the value (`CacheConfig.metrics_info()`; the V1 engine's
 * `PrometheusStatLogger.log_metrics_info("cache_config", ...)`, vllm/v1/metrics/loggers.py, read at commit
 * 005a810b). `num_gpu_blocks` is "None" until the engine has sized its cache; `block_size` is the attention
 * block size after the hybrid alignment (vllm/v1/engine/core_client.py syncs it from the engine, read on main in
 * 2026). docs/cli/probe.md, "kv", cites both.
 */
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fp4forge/core/error.h"

namespace fp4forge::probe {

/** One sample of the Prometheus text exposition format: `name{label="value",...} value [timestamp]`. */
struct PromSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  ///< values unescaped (\\, \", \n)
  double value = 0.0;
  /** The value of label `key`; "" when absent. */
  std::string label(std::string_view key) const;
};

/** The samples of metric `name` in Prometheus text `text`. Lines that do not parse are skipped (a hostile or
 * truncated body yields fewer samples, never an exception); at most `max_samples` are returned and lines longer
 * than 64 KiB are skipped. */
std::vector<PromSample> prometheus_samples(std::string_view text, std::string_view name, std::size_t max_samples = 64);

/** The KV pool a seat of `plan --json` expects, in tokens: `placement.num_blocks` x `kv.attention_block_size`
 * (the block size vLLM's cache_config reports). `seat` names the seat (its `name` or `served_name`); "" picks the
 * only seat, else the one whose served name is `model`. */
struct PlanKv {
  std::int64_t tokens = 0;
  std::int64_t num_blocks = 0;
  std::int64_t block_size = 0;
  std::string seat;  ///< the seat's name in the plan
};
/** BAD_INPUT when the file is not a plan (schema fp4forge.plan/1), names no such seat, or the seat was not
 * placed (no num_blocks); USAGE when several seats match and none was named; IO when unreadable. */
Result<PlanKv> kv_from_plan(const std::filesystem::path& plan_json, std::string_view seat, std::string_view model);

}  // namespace fp4forge::probe
