// The memory rules of each modelled vLLM version (vllm_version.h; sources in docs/plan-overheads.md).
#include "fp4forge/kvplan/vllm_version.h"

#include <charconv>
#include <tuple>

#include "fp4forge/util/strings.h"

namespace fp4forge::kvplan {

std::string_view tokens_report_name(TokensReport t) {
  switch (t) {
    case TokensReport::BLOCKS: return "num_blocks x block_size";
    case TokensReport::PER_GROUP: return "num_blocks // groups x block_size";
    case TokensReport::CONCURRENCY: return "max_concurrency x max_model_len";
  }
  return "?";
}

bool at_least(const VllmRules& r, int major, int minor, int patch) noexcept {
  return std::tie(r.major, r.minor, r.patch) >= std::tie(major, minor, patch);
}

const VllmRules& newest_vllm_rules() noexcept {
  static const VllmRules r = *vllm_rules(kNewestVllm);  // kNewestVllm is modelled by definition (a unit test)
  return r;
}

Result<VllmRules> vllm_rules(std::string_view version) {
  std::string_view v = version;
  if (v == "newest" || v == "latest") v = kNewestVllm;
  if (!v.empty() && (v.front() == 'v' || v.front() == 'V')) v.remove_prefix(1);
  VllmRules r;
  int* parts[3] = {&r.major, &r.minor, &r.patch};
  std::size_t n = 0;
  std::string_view rest = v;
  while (n < 3 && !rest.empty()) {
    const auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), *parts[n]);
    if (ec != std::errc() || *parts[n] < 0) break;
    ++n;
    rest.remove_prefix(static_cast<std::size_t>(p - rest.data()));
    if (rest.empty() || rest.front() != '.') break;
    rest.remove_prefix(1);
  }
  if (n < 2 || !rest.empty())
    return make_error(Errc::USAGE, "vllm_version '{}': expected MAJOR.MINOR[.PATCH], e.g. 0.24 or 0.9.1", version);
  r.version = n == 2 ? fmt::format("{}.{}", r.major, r.minor) : fmt::format("{}.{}.{}", r.major, r.minor, r.patch);
  if (r.major != 0 || r.minor < kOldestVllmMinor || r.minor > kNewestVllmMinor)
    return make_error(Errc::USAGE,
                      "vllm_version {}: fp4forge models vLLM {} to {} and does not guess the rules of others; hint: "
                      "the nearest modelled version is {}, and log=FILE (the seat's start-up log) measures what a "
                      "version changes (docs/plan-overheads.md)",
                      r.version, kOldestVllm, kNewestVllm,
                      (r.major == 0 && r.minor < kOldestVllmMinor) ? kOldestVllm : kNewestVllm);
  r.startup_check = at_least(r, 0, 9, 1);
  r.budget_from_snapshot = at_least(r, 0, 9, 1);
  r.requested_ceil = at_least(r, 0, 14);
  r.cuda_graphs_in_budget = at_least(r, 0, 21);
  r.default_util = at_least(r, 0, 21) ? 0.92 : 0.90;
  r.tokens = !at_least(r, 0, 9, 1) ? TokensReport::BLOCKS
             : at_least(r, 0, 21)  ? TokensReport::CONCURRENCY
                                   : TokensReport::PER_GROUP;
  r.concurrency_from_tokens = !at_least(r, 0, 9, 1);
  r.sliding_in_flight_factor = at_least(r, 0, 26) ? 2 : 1;  // #47728 (2026-07-08), first in 0.26
  r.hybrid_prefix_caching = at_least(r, 0, 28);                // #50991 (2026-08-04): certain in 0.28
  r.big_gpu_batched_16k = at_least(r, 0, 28);                  // #51726 (2026-08-11)
  r.cuda_graph_cap = 512;
  r.sm100_graph_cap_1024 = at_least(r, 0, 28);                 // #49390 (2026-08-07)
  r.v2_runner_reserves_graphs = at_least(r, 0, 29);            // #53306 (~2026-08-24), inferred
  r.kv_from_free_memory = at_least(r, 0, 34);                  // measure_kv_cache_blocks, inferred
  return r;
}

bool v2_model_runner(const VllmRules& r, std::string_view architecture, std::string_view model_type, bool moe,
                     bool hybrid) noexcept {
  if (!at_least(r, 0, 22) || hybrid) return false;
  if (!at_least(r, 0, 25)) {  // dense Qwen3 from 0.22, dense Llama / Mistral from 0.23 (#43458)
    if (moe) return false;
    if (model_type == "qwen3") return true;
    return at_least(r, 0, 23) && (model_type == "llama" || model_type == "mistral");
  }
  // 0.25 (#44443): every dense generate model; MoE only when listed (DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES,
  // vllm/config/vllm.py:69-79 at 017e9f4448; the lists of 0.25 - 0.27 are taken to be the same, inferred).
  if (!moe) return true;
  for (std::string_view a : {"DeepseekV2ForCausalLM", "DeepseekV4ForCausalLM", "GraniteMoeForCausalLM",
                             "InklingForCausalLM", "InklingForConditionalGeneration", "KimiK3ForCausalLM",
                             "LongcatFlashNgramForCausalLM", "Qwen2MoeForCausalLM"})
    if (architecture == a) return true;
  return false;
}

std::int64_t sliding_in_flight_tokens(const VllmRules& r, std::int64_t max_num_batched_tokens,
                                      bool async_scheduling) noexcept {
  return max_num_batched_tokens * (async_scheduling ? r.sliding_in_flight_factor : 1);
}

bool graphs_in_budget(const VllmRules& r, bool v2_runner) noexcept {
  return r.cuda_graphs_in_budget && (!v2_runner || r.v2_runner_reserves_graphs);
}

bool sm100_family(std::string_view gpu_name) noexcept {
  const std::string n = util::ascii_lower(gpu_name);
  for (std::string_view k : {"b200", "b300", "gb200", "gb300", "b100"})
    if (n.find(k) != std::string::npos) return true;
  return false;
}

}  // namespace fp4forge::kvplan
