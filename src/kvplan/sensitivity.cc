// The flag-dependent terms of a placed seat and the concurrency they span (sensitivity.h).
#include "fp4forge/kvplan/sensitivity.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "fp4forge/kvplan/placement.h"
#include "fp4forge/util/checked.h"
#include "fp4forge/util/size.h"

namespace fp4forge::kvplan {
namespace {

/** The flags a term depends on. */
struct Flags {
  std::int64_t batched = 0, seqs = 0;
  bool eager = false, mm = true, async = true;
};

struct Outcome {
  OverheadTerms terms;
  std::uint64_t per_request = 0;
  double concurrency = 0.0;
};

struct Evaluator {
  const SeatModel& m;
  const SeatPlacement& p;
  const GpuSpec& gpu;
  bool overhead_fixed = false;  // overhead= given: no flag moves it

  Outcome at(const Flags& f) const {
    ProfileShape shape = seat_profile_shape(m, f.batched, f.seqs, gpu.name);
    shape.enforce_eager = f.eager;
    shape.multimodal = f.mm && (m.info.has_vision_config || m.info.has_audio_config);
    Outcome o;
    o.terms = estimate_overhead(m.info, shape, m.rules);
    std::uint64_t overhead = p.overhead_bytes;
    if (!overhead_fixed) {
      const auto moved = static_cast<std::int64_t>(std::min<std::uint64_t>(overhead, INT64_MAX)) +
                         static_cast<std::int64_t>(o.terms.in_budget()) - static_cast<std::int64_t>(p.terms.in_budget());
      overhead = moved > 0 ? static_cast<std::uint64_t>(moved) : 0;
    }
    const KvDemand d = kv_demand(m.layout, m.max_model_len, sliding_in_flight_tokens(m.rules, f.batched, f.async));
    o.per_request = d.bytes_per_request;
    // The planned KV memory (after 0.34's margin, as the placement computed it) moved by what the flags move: the
    // planned flags give the planned concurrency exactly (issue 55 tryout I: 10,624.60x "as planned" beside a
    // 10,650.95x row for the same flags, the row taken before the margin).
    const auto kv = static_cast<std::int64_t>(std::min<std::uint64_t>(p.available_kv_bytes, INT64_MAX)) -
                    (static_cast<std::int64_t>(std::min<std::uint64_t>(overhead, INT64_MAX)) -
                     static_cast<std::int64_t>(std::min<std::uint64_t>(p.overhead_bytes, INT64_MAX)));
    const std::uint64_t avail = kv > 0 ? static_cast<std::uint64_t>(kv) : 0;
    o.concurrency = kv_max_concurrency(d, kv_num_blocks(m.layout, avail));
    return o;
  }
};

std::string on_off(bool b) { return b ? "on" : "off"; }

}  // namespace

Sensitivity seat_sensitivity(const SeatModel& m, const SeatPlacement& p, const GpuSpec& rank0) {
  Sensitivity out;
  if (!p.placed || m.layout.groups.empty()) return out;
  out.computed = true;
  Evaluator ev{m, p, rank0, m.overhead.has_value()};
  if (ev.overhead_fixed) out.note = "overhead= is given: no flag below moves it; only the sliding-window reserve can";
  const Flags planned{p.max_num_batched_tokens, p.max_num_seqs, m.arg.enforce_eager, m.arg.mm, p.async_scheduling};
  const bool tower = m.info.has_vision_config || m.info.has_audio_config;
  const bool sliding = std::any_of(m.layout.groups.begin(), m.layout.groups.end(),
                                   [](const KvGroup& g) { return g.kind == LayerKind::SLIDING; });
  std::vector<std::int64_t> seqs{1, 256, 1024, planned.seqs}, batched{2048, 8192, 16384, planned.batched};
  for (auto* v : {&seqs, &batched}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  auto add = [&](std::string term, std::string key, std::string assumed, bool dflt, auto values, auto set, auto bytes) {
    SensitivityTerm t{std::move(term), std::move(key), std::move(assumed), dflt, {}};
    for (const auto& v : values) {
      Flags f = planned;
      set(f, v);
      const Outcome o = ev.at(f);
      t.values.push_back(SensitivityValue{fmt::format("{}", v), f.batched == planned.batched && f.seqs == planned.seqs &&
                                                                    f.eager == planned.eager && f.mm == planned.mm &&
                                                                    f.async == planned.async,
                                          bytes(o), o.concurrency});
    }
    out.terms.push_back(std::move(t));
  };
  add("sampler warm-up (max_num_seqs rows x vocabulary) and activations: the profile peak", "max_num_seqs",
      std::to_string(planned.seqs), p.seqs_default, seqs, [](Flags& f, std::int64_t v) { f.seqs = v; },
      [](const Outcome& o) { return o.terms.profile_peak; });
  add("activations of max_num_batched_tokens (and the sliding-window reserve, the graph cap)", "max_num_batched_tokens",
      std::to_string(planned.batched), p.batched_default, batched, [](Flags& f, std::int64_t v) { f.batched = v; },
      [](const Outcome& o) { return o.terms.profile_peak; });
  // Graphs beside the budget (before vLLM 0.21) move no KV figure: the term says where they are (issue 55 tryout:
  // "CUDA graphs 0 B" beside an overhead line of 1.10 GiB of graphs).
  add(
      p.terms.cuda_graphs_in_budget
          ? std::string("CUDA graphs")
          : fmt::format("CUDA graphs in the budget (these rules keep the graphs, {}, beside it: enforce_eager=on frees "
                        "them at start-up, not for the KV cache)",
                        format_bytes(p.terms.cuda_graphs)),
      "enforce_eager", on_off(planned.eager), !m.arg.enforce_eager, std::vector<std::string>{"off", "on"},
      [](Flags& f, const std::string& v) { f.eager = v == "on"; },
      [](const Outcome& o) { return o.terms.cuda_graphs_in_budget ? o.terms.cuda_graphs : 0; });
  if (tower)
    add("encoder cache (multimodal profiling)", "mm", on_off(planned.mm), m.arg.mm, std::vector<std::string>{"on", "off"},
        [](Flags& f, const std::string& v) { f.mm = v == "on"; }, [](const Outcome& o) { return o.terms.encoder; });
  if (sliding && m.rules.sliding_in_flight_factor > 1)
    add("sliding-window reserve (per request)", "async_scheduling", on_off(planned.async), !m.arg.async_scheduling,
        std::vector<std::string>{"on", "off"}, [](Flags& f, const std::string& v) { f.async = v == "on"; },
        [](const Outcome& o) { return o.per_request; });
  // The range over every combination.
  out.min_concurrency = p.max_concurrency;
  out.max_concurrency = p.max_concurrency;
  const std::vector<bool> eagers{false, true};
  const std::vector<bool> mms = tower ? std::vector<bool>{true, false} : std::vector<bool>{planned.mm};
  const std::vector<bool> asyncs = sliding && m.rules.sliding_in_flight_factor > 1 ? std::vector<bool>{true, false}
                                                                                    : std::vector<bool>{planned.async};
  for (std::int64_t q : seqs)
    for (std::int64_t b : batched)
      for (bool e : eagers)
        for (bool mm : mms)
          for (bool a : asyncs) {
            const double c = ev.at(Flags{b, q, e, mm, a}).concurrency;
            out.min_concurrency = std::min(out.min_concurrency, c);
            out.max_concurrency = std::max(out.max_concurrency, c);
          }
  return out;
}

}  // namespace fp4forge::kvplan

namespace fp4forge::kvplan {

nlohmann::ordered_json to_json(const Sensitivity& s) {
  using Json = nlohmann::ordered_json;
  if (!s.computed) return Json(nullptr);
  Json terms = Json::array();
  for (const auto& t : s.terms) {
    Json values = Json::array();
    for (const auto& v : t.values)
      values.push_back({{"value", v.value}, {"planned", v.planned}, {"bytes", v.bytes},
                        {"max_concurrency", std::round(v.max_concurrency * 10000.0) / 10000.0}});
    terms.push_back({{"term", t.term}, {"key", t.key}, {"assumed", t.assumed}, {"assumed_default", t.assumed_default},
                     {"values", values}});
  }
  return {{"terms", terms},
          {"min_concurrency", std::round(s.min_concurrency * 10000.0) / 10000.0},
          {"max_concurrency", std::round(s.max_concurrency * 10000.0) / 10000.0},
          {"note", s.note.empty() ? Json(nullptr) : Json(s.note)}};
}

std::string to_text(const Sensitivity& s, double planned_concurrency) {
  if (!s.computed) return {};
  std::string o = fmt::format("  sensitivity      maximum concurrency {:.2f}x as planned; {:.2f}x to {:.2f}x over every "
                              "value of the flags below (seat keys)\n",
                              planned_concurrency, s.min_concurrency, s.max_concurrency);
  for (const auto& t : s.terms) {
    std::string vals;
    std::uint64_t at = 0;
    for (const auto& v : t.values) {
      vals += fmt::format("{}{}={} {:.2f}x", vals.empty() ? "" : ", ", t.key, v.value, v.max_concurrency);
      if (v.planned) at = v.bytes;
    }
    o += fmt::format("    {}={} ({}): {} {}; {}\n", t.key, t.assumed, t.assumed_default ? "default" : "given", t.term,
                     format_bytes(at), vals);
  }
  if (!s.note.empty()) o += "    " + s.note + "\n";
  return o;
}

}  // namespace fp4forge::kvplan
