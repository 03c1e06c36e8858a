// The kv check (internal.h): the KV pool the seat really serves, read from vLLM's /metrics
// (vllm:cache_config_info, kv_pool.h), against the pool expected (--expect-kv-tokens, or a plan --json seat). A
// re-pulled image or another flag changes the pool while every request still answers; only the metrics show it.
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "fp4forge/probe/kv_pool.h"
#include "fp4forge/util/format.h"
#include "internal.h"

namespace fp4forge::probe::detail {

namespace {

/** A label holding a non-negative integer as Python's str() writes it; -1 otherwise ("None", "", "16.0"). */
std::int64_t label_int(const PromSample& s, std::string_view key) {
  const std::string v = s.label(key);
  if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::strtoll(v.c_str(), nullptr, 10);
}

}  // namespace

void check_kv(Ctx& ctx, CheckResult& r, Clock::time_point deadline) {
  KvPool kv;
  kv.expected_tokens = ctx.opts.expect_kv_tokens > 0 ? ctx.opts.expect_kv_tokens : -1;
  r.kv = kv;
  const std::string expect =
      kv.expected_tokens > 0
          ? fmt::format("; the expected pool of {} tokens{} was not compared", kv.expected_tokens,
                        ctx.opts.expect_kv_from.empty() ? "" : " (" + ctx.opts.expect_kv_from + ")")
          : "";
  // /metrics is the server's, not the model's: for a model the server does not list, its pool is another model's
  // (issue 55 tryout G: kv passed for a --model nothing served).
  if (ctx.shared.model_not_listed)
    return skip(r, "model-not-served",
                fmt::format("not compared: GET /v1/models does not list '{}' (detail above), so the pool /metrics "
                            "reports is another model's{}",
                            ctx.model, expect));
  Call c = exchange(ctx, "GET", "/metrics", nullptr, deadline, ExchangeMode{.raw_text = true, .auth_fatal = false});
  r.http_status = c.status;
  if (!c.ok) {
    if (c.status >= 400 && c.status < 500)  // absent (a gateway, another server) or guarded: could not check
      return skip(
          r, "no-kv-metrics",
          fmt::format("could not check the KV pool: {}{}{}; vLLM serves /metrics at its own port", c.detail,
                      c.status == 404 ? " (no metrics endpoint here: a gateway, or a server that is not vLLM)" : "",
                      expect));
    return fail(r, c.cls, c.detail);
  }
  const auto samples = prometheus_samples(c.raw, "vllm:cache_config_info");
  kv.engines = static_cast<int>(samples.size());
  const PromSample* s = nullptr;
  for (const auto& x : samples)
    if (label_int(x, "num_gpu_blocks") > 0 && label_int(x, "block_size") > 0) {
      s = &x;
      break;
    }
  if (s == nullptr) {
    r.kv = kv;
    return skip(r, "no-kv-metrics",
                fmt::format("could not check the KV pool: GET /metrics ({} bytes) has {} vllm:cache_config_info "
                            "sample(s){}{}; expected vLLM's Prometheus metrics (not a gateway's)",
                            c.raw.size(), samples.size(),
                            samples.empty() ? "" : fmt::format(" without num_gpu_blocks (it reads '{}': the engine "
                                                               "has not sized its cache)",
                                                               excerpt(samples[0].label("num_gpu_blocks"), 20)),
                            expect));
  }
  kv.num_gpu_blocks = label_int(*s, "num_gpu_blocks");
  kv.block_size = label_int(*s, "block_size");
  kv.tokens = kv.num_gpu_blocks * kv.block_size;
  kv.kv_cache_size_tokens = label_int(*s, "kv_cache_size_tokens");
  r.kv = kv;
  // Counts with separators, as plan prints them; a label the metric lacks said as such (issue 55 tryout).
  const auto count = [](std::int64_t v) {
    return v >= 0 ? format_count(static_cast<std::uint64_t>(v)) : std::to_string(v);
  };
  const std::string dtype = s->label("cache_dtype");
  const std::string served = fmt::format(
      "served KV pool {} tokens ({} blocks x {}, cache_dtype {}{})", count(kv.tokens), count(kv.num_gpu_blocks),
      kv.block_size, dtype.empty() ? std::string("not labelled") : excerpt(dtype, 20),
      kv.kv_cache_size_tokens > 0 ? fmt::format(", GPU KV cache size {} tokens", count(kv.kv_cache_size_tokens)) : "");
  if (kv.expected_tokens <= 0) return pass(r, served + "; no expectation given (--expect-kv-tokens N)");
  const double diff = static_cast<double>(kv.tokens - kv.expected_tokens) / static_cast<double>(kv.expected_tokens);
  r.metric = std::abs(diff);
  const std::string vs =
      fmt::format("{}; expected {} tokens{}: {:+.1f} %", served, count(kv.expected_tokens),
                  ctx.opts.expect_kv_from.empty() ? "" : " (" + ctx.opts.expect_kv_from + ")", diff * 100.0);
  if (std::abs(diff) > ctx.opts.kv_tolerance)
    return fail(r, "kv-mismatch",
                fmt::format("{}, beyond {:.0f} %: the seat runs another KV pool than planned (a re-pulled image, "
                            "another --gpu-memory-utilization, --max-model-len, --kv-cache-dtype or --block-size, or "
                            "another tenant on the GPU; F39); re-plan, or restart the seat with the planned flags",
                            vs, ctx.opts.kv_tolerance * 100.0));
  pass(r, vs);
}

}  // namespace fp4forge::probe::detail
