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
                      "vllm_version {}: fp4forge models vLLM {} to {}; hint: give the nearest modelled version, "
                      "or overhead=SIZE from the seat's log (docs/plan-overheads.md)",
                      r.version, kOldestVllm, kNewestVllm);
  r.startup_check = at_least(r, 0, 9, 1);
  r.budget_from_snapshot = at_least(r, 0, 9, 1);
  r.requested_ceil = at_least(r, 0, 14);
  r.cuda_graphs_in_budget = at_least(r, 0, 21);
  r.default_util = at_least(r, 0, 21) ? 0.92 : 0.90;
  r.tokens = !at_least(r, 0, 9, 1) ? TokensReport::BLOCKS
             : at_least(r, 0, 21)  ? TokensReport::CONCURRENCY
                                   : TokensReport::PER_GROUP;
  r.concurrency_from_tokens = !at_least(r, 0, 9, 1);
  r.sliding_in_flight_factor = at_least(r, 0, 26) ? 2 : 1;
  r.hybrid_prefix_caching = at_least(r, 0, 26);
  r.big_gpu_batched_16k = at_least(r, 0, 28);
  r.cuda_graph_cap = 512;
  return r;
}

}  // namespace fp4forge::kvplan
