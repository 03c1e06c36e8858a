// Calibration from a seat's start-up log (calibration.h): the settings it ran with, the overhead it measured,
// how that overhead carries to other settings, and plan's estimate beside each logged figure.
#include "fp4forge/kvplan/calibration.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "fp4forge/util/checked.h"
#include "fp4forge/util/size.h"

namespace fp4forge::kvplan {
namespace {

using Json = nlohmann::json;

std::optional<std::int64_t> int_arg(const Json& args, const char* key) {
  if (!args.is_object() || !args.contains(key)) return std::nullopt;
  const Json& v = args[key];
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_string()) {  // vLLM's human-readable integers: "128k" = 128000, "128K" = 131072
    const std::string s = v.get<std::string>();
    if (s.empty()) return std::nullopt;
    double mult = 1;
    std::string num = s;
    const char c = s.back();
    if (c == 'k' || c == 'm') mult = c == 'k' ? 1e3 : 1e6;
    if (c == 'K' || c == 'M') mult = c == 'K' ? 1024.0 : 1048576.0;
    if (mult != 1) num.pop_back();
    char* end = nullptr;
    const double x = std::strtod(num.c_str(), &end);
    // `inf`, `nan` and values past any real flag (2^53) are not integers vLLM would take: not read (casting them
    // would be undefined).
    if (end == num.c_str() || *end != '\0' || !(x > 0) || !(x * mult <= 9007199254740992.0)) return std::nullopt;
    return static_cast<std::int64_t>(x * mult);
  }
  return std::nullopt;
}

std::optional<bool> bool_arg(const Json& args, const char* key) {
  if (!args.is_object() || !args.contains(key) || !args[key].is_boolean()) return std::nullopt;
  return args[key].get<bool>();
}

std::string line_of(std::size_t n) { return fmt::format("line {}", n); }

template <typename T>
std::optional<double> as_double(const std::optional<LoggedValue<T>>& v) {
  if (!v) return std::nullopt;
  return static_cast<double>(v->value);
}

template <typename T>
std::string where(const std::optional<LoggedValue<T>>& v, std::string_view missing) {
  return v ? line_of(v->line) : std::string(missing);
}

}  // namespace

LoggedSeat read_logged_seat(const StartupLog& log) {
  LoggedSeat s;
  s.log = log;
  if (log.version) {  // "0.19.1rc1.dev301+g60995c05b" -> 0.19.1
    const std::string& v = log.version->value;
    std::size_t end = 0, dots = 0;
    while (end < v.size() && (std::isdigit(static_cast<unsigned char>(v[end])) || (v[end] == '.' && dots < 2))) {
      if (v[end] == '.') ++dots;
      ++end;
    }
    std::string core = v.substr(0, end);
    if (!core.empty() && core.back() == '.') core.pop_back();
    auto r = vllm_rules(core);
    if (r.ok()) s.rules = *r;
    else s.log.notes.push_back(fmt::format("line {}: vLLM {} is not modelled ({})", log.version->line, v, r.error().message));
  }
  const Json& a = log.args;
  if (a.is_object() && a.contains("gpu_memory_utilization") && a["gpu_memory_utilization"].is_number())
    s.util = a["gpu_memory_utilization"].get<double>();
  else if (log.util)
    s.util = log.util->value;
  s.batched = int_arg(a, "max_num_batched_tokens");
  if (!s.batched && log.batched) s.batched = log.batched->value;
  s.max_num_seqs = int_arg(a, "max_num_seqs");
  if (!s.max_num_seqs && log.max_num_seqs) s.max_num_seqs = log.max_num_seqs->value;
  if (auto tp = int_arg(a, "tensor_parallel_size"); tp && *tp >= 1 && *tp <= 4096) s.tp = static_cast<int>(*tp);
  s.enforce_eager = bool_arg(a, "enforce_eager");
  s.async_scheduling = bool_arg(a, "async_scheduling");
  if (!s.async_scheduling && log.async_scheduling) s.async_scheduling = log.async_scheduling->value;
  s.max_model_len = int_arg(a, "max_model_len");
  if (!s.max_model_len && log.concurrency_tokens) s.max_model_len = log.concurrency_tokens->value;
  if (auto lm = bool_arg(a, "language_model_only"); lm && *lm) s.mm = false;
  if (a.is_object() && a.contains("limit_mm_per_prompt") && a["limit_mm_per_prompt"].is_object() &&
      !a["limit_mm_per_prompt"].empty()) {
    const Json& l = a["limit_mm_per_prompt"];
    if (std::all_of(l.begin(), l.end(), [](const Json& x) { return x.is_number() && x == 0; })) s.mm = false;
  }
  if (a.is_object() && a.contains("speculative_config") && a["speculative_config"].is_object()) {
    const Json& sc = a["speculative_config"];
    if (sc.contains("num_speculative_tokens") && sc["num_speculative_tokens"].is_number_integer())
      s.spec_tokens = sc["num_speculative_tokens"].get<int>();
  }
  return s;
}

void measure_sliding_reserve(LoggedSeat& seat, const KvLayout& layout, const VllmRules& rules) {
  const bool sliding = std::any_of(layout.groups.begin(), layout.groups.end(),
                                   [](const KvGroup& g) { return g.kind == LayerKind::SLIDING; });
  if (!sliding || rules.sliding_in_flight_factor < 2) return;
  const StartupLog& log = seat.log;
  if ((!log.num_gpu_blocks && !log.available_kv_bytes) || !log.max_concurrency || !seat.max_model_len || !seat.batched) {
    seat.sliding_note = "the log lacks the KV memory, the concurrency or max_num_batched_tokens: the sliding-window "
                        "reserve is not measured";
    return;
  }
  const std::int64_t blocks = log.num_gpu_blocks ? log.num_gpu_blocks->value
                                                 : kv_num_blocks(layout, log.available_kv_bytes->value);
  const KvDemand one = kv_demand(layout, *seat.max_model_len, *seat.batched);
  const KvDemand two = kv_demand(layout, *seat.max_model_len, 2 * *seat.batched);
  if (one.blocks_per_request == two.blocks_per_request) {
    seat.sliding_note = "max_model_len is within the window plus one batch: both sliding-window rules agree";
    return;
  }
  const double logged = log.max_concurrency->value;
  auto off = [&](const KvDemand& d) { return std::fabs(kv_max_concurrency(d, blocks) - logged) / logged; };
  // The printed KV memory has 0.005 GiB of rounding and the concurrency two decimals.
  const double tol = std::max(0.01, 0.006 / logged);
  const double e1 = off(one), e2 = off(two);
  if (std::min(e1, e2) > tol) {
    seat.sliding_note = fmt::format("the logged concurrency {:.2f}x matches neither sliding-window reserve ({:.2f}x with "
                                    "1 batch, {:.2f}x with 2): not measured", logged,
                                    kv_max_concurrency(one, blocks), kv_max_concurrency(two, blocks));
    return;
  }
  seat.sliding_in_flight_batches = e1 <= e2 ? 1 : 2;
  seat.sliding_note = fmt::format("the logged concurrency {:.2f}x matches a reserve of window - 1 + {} x "
                                  "max_num_batched_tokens ({}; {:.2f}x with the other)",
                                  logged, *seat.sliding_in_flight_batches,
                                  *seat.sliding_in_flight_batches == 2 ? "async scheduling on" : "async scheduling off",
                                  kv_max_concurrency(e1 <= e2 ? two : one, blocks));
}

namespace {

/** The logged request: util x the torch total, with where each came from; 0 when it cannot be known. */
std::uint64_t logged_request(const CalibrationInput& in, const VllmRules& rules, CalibratedOverhead& c) {
  const LoggedSeat& ls = *in.logged;
  const StartupLog& log = ls.log;
  if (ls.util) {
    c.util = *ls.util;
    c.util_source = log.args.is_object() && log.args.contains("gpu_memory_utilization")
                        ? fmt::format("the log's args (line {})", log.args_line)
                        : where(log.util, "the log");
  } else {
    c.util = rules.default_util;
    c.util_source = fmt::format("vLLM {}'s default (the log states none)", rules.version);
    c.gaps.push_back(c.util_source);
  }
  const std::uint64_t gib_round = 6 * kMiB;  // the log prints totals with two decimals of GiB
  if (log.torch_total_bytes && in.gpu_torch_total > 0) {
    const std::uint64_t lt = log.torch_total_bytes->value;
    const std::uint64_t d = lt > in.gpu_torch_total ? lt - in.gpu_torch_total : in.gpu_torch_total - lt;
    if (d <= gib_round) {
      c.torch_total = in.gpu_torch_total;
      c.total_source = fmt::format("GPU {}, the logged card (the log prints {}, {})", in.gpu_id, format_bytes(lt),
                                   line_of(log.torch_total_bytes->line));
    } else {
      c.torch_total = lt;
      c.total_source = fmt::format("the log ({}); GPU {} is another card ({})", line_of(log.torch_total_bytes->line),
                                   in.gpu_id, format_bytes(in.gpu_torch_total));
    }
  } else if (log.torch_total_bytes) {
    c.torch_total = log.torch_total_bytes->value;
    c.total_source = fmt::format("the log ({})", line_of(log.torch_total_bytes->line));
  } else if (in.gpu_torch_total > 0) {
    c.torch_total = in.gpu_torch_total;
    c.total_source = fmt::format("GPU {} (the log prints no total: taken to be the logged card)", in.gpu_id);
    c.gaps.push_back("the log prints no GPU total: the logged request is util x GPU " + in.gpu_id + "'s torch total");
  } else {
    c.gaps.push_back("the log prints no GPU total and no --gpu is given: the overhead cannot be measured");
    return 0;
  }
  const double x = c.util * static_cast<double>(c.torch_total);
  return util::sat_from_double(rules.requested_ceil ? std::ceil(x) : std::floor(x));
}

/** The profile shape the log ran with: its args where it states them, vLLM's defaults for the card else. */
ProfileShape logged_shape(const CalibrationInput& in) {
  const LoggedSeat& ls = *in.logged;
  ProfileShape p = in.planned;
  p.batched_tokens = ls.batched.value_or(in.default_batched);
  p.max_num_seqs = ls.max_num_seqs.value_or(in.default_seqs);
  p.tp = ls.tp.value_or(in.planned.tp);
  p.spec_tokens = ls.spec_tokens.value_or(in.planned.spec_tokens);
  p.multimodal = in.has_tower && ls.mm.value_or(true);
  p.enforce_eager = ls.enforce_eager.value_or(false);
  return p;
}

void add_rows(const CalibrationInput& in, const OverheadTerms& est, std::uint64_t requested, std::uint64_t kv_logged,
              const VllmRules& rules, const ProfileShape& shape, CalibratedOverhead& c) {
  const StartupLog& log = in.logged->log;
  auto row = [&](std::string term, std::optional<double> e, std::optional<double> l, std::string unit, std::string line) {
    c.rows.push_back(CalibrationRow{std::move(term), e, l, std::move(unit), std::move(line)});
  };
  // A config-only folder has no weight estimate of its own (the log's weights stand in for the KV row).
  row("weights (per GPU)", in.weights_estimate ? std::optional<double>(static_cast<double>(in.weights_estimate)) : std::nullopt,
      as_double(log.weights_bytes), "bytes", where(log.weights_bytes, "no 'Model loading took' line"));
  std::optional<double> non_torch = as_double(log.non_torch_bytes);
  if (!non_torch && log.consumed_bytes && log.weights_bytes && log.consumed_bytes->value >= log.weights_bytes->value)
    non_torch = static_cast<double>(log.consumed_bytes->value - log.weights_bytes->value);
  row("profile peak (activations, sampler, encoder)", static_cast<double>(est.profile_peak + est.encoder),
      as_double(log.activation_peak_bytes), "bytes", where(log.activation_peak_bytes, "absent from the log"));
  row("non-torch memory", static_cast<double>(est.non_torch), non_torch, "bytes",
      log.non_torch_bytes  ? line_of(log.non_torch_bytes->line)
      : log.consumed_bytes ? line_of(log.consumed_bytes->line) + " (consumed - weights)"
                           : "absent from the log");
  row(est.cuda_graphs_in_budget ? "CUDA graphs (in the budget)" : "CUDA graphs (beside the budget)",
      static_cast<double>(est.cuda_graphs), as_double(log.graph_estimate_bytes), "bytes",
      where(log.graph_estimate_bytes, "no 'Estimated CUDA graph memory' line"));
  row("CUDA graphs captured", static_cast<double>(est.cuda_graphs), as_double(log.graph_captured_bytes), "bytes",
      where(log.graph_captured_bytes, "no 'Graph capturing finished' line"));
  row("overhead (budget - weights - KV)", static_cast<double>(est.in_budget()),
      c.measured ? std::optional<double>(static_cast<double>(c.measured_bytes)) : std::nullopt, "bytes",
      c.measured ? "measured" : "not measurable");
  if (requested == 0 || in.layout == nullptr) return;
  const std::uint64_t weights = in.weights_estimate ? in.weights_estimate
                                : log.weights_bytes ? log.weights_bytes->value : 0;
  const std::uint64_t fixed = util::sat_add(weights, est.in_budget());
  const std::uint64_t kv_est = requested > fixed ? requested - fixed : 0;
  row("KV memory", static_cast<double>(kv_est), kv_logged ? std::optional<double>(static_cast<double>(kv_logged)) : std::nullopt,
      "bytes", where(log.available_kv_bytes, "no 'Available KV cache memory' line"));
  const std::int64_t len = in.logged->max_model_len.value_or(0);
  if (len <= 0) {
    c.gaps.push_back("the log states no max_model_len: tokens and concurrency are not compared");
    return;
  }
  const int batches = in.logged->sliding_in_flight_batches.value_or(
      in.logged->async_scheduling.value_or(true) ? 2 : 1);
  const KvDemand d = kv_demand(*in.layout, len, sliding_in_flight_tokens(rules, shape.batched_tokens, batches == 2));
  const KvReport r = kv_report(*in.layout, d, kv_num_blocks(*in.layout, kv_est), rules);
  row("GPU KV cache size", static_cast<double>(r.tokens), as_double(log.kv_cache_tokens), "tokens",
      where(log.kv_cache_tokens, "no 'GPU KV cache size' line"));
  row(fmt::format("maximum concurrency at {} tokens", format_count(static_cast<std::uint64_t>(len))), r.max_concurrency,
      log.max_concurrency ? std::optional<double>(log.max_concurrency->value) : std::nullopt, "x",
      where(log.max_concurrency, "no 'Maximum concurrency' line"));
}

}  // namespace

CalibratedOverhead calibrate_overhead(const CalibrationInput& in) {
  CalibratedOverhead c;
  const LoggedSeat& ls = *in.logged;
  const StartupLog& log = ls.log;
  const VllmRules& rules = ls.rules ? *ls.rules : *in.planned_rules;
  if (!ls.rules) c.gaps.push_back(fmt::format("the log prints no modelled vLLM version: vLLM {}'s rules are assumed",
                                              in.planned_rules->version));
  if (!log.weights_bytes) c.gaps.push_back("no 'Model loading took' line: the weights stay plan's");
  const ProfileShape shape = logged_shape(in);
  const OverheadTerms est = estimate_overhead(*in.info, shape, rules);
  const std::uint64_t requested = logged_request(in, rules, c);
  const std::uint64_t kv = log.available_kv_bytes ? log.available_kv_bytes->value : 0;
  if (!log.available_kv_bytes) c.gaps.push_back("no 'Available KV cache memory' line: the overhead stays an estimate");
  const std::uint64_t weights = log.weights_bytes ? log.weights_bytes->value : in.weights_estimate;
  c.measured = requested > 0 && log.available_kv_bytes;
  if (c.measured) {
    const std::uint64_t used = util::sat_add(weights, kv);
    c.measured_bytes = requested > used ? requested - used : 0;
    if (requested < used)
      c.gaps.push_back(fmt::format("weights + KV ({}) exceed util x total ({}): the log and the card disagree; the "
                                   "overhead is taken as 0", format_bytes(used), format_bytes(requested)));
  }
  // Carry each term, or move it by its estimate's difference when an input it depends on changed.
  const ProfileShape& now = in.planned;
  const OverheadTerms& e = in.planned_terms;
  const bool sampler_rule = at_least(rules, 0, 19) != at_least(*in.planned_rules, 0, 19);
  std::int64_t delta = 0;
  auto term = [&](std::string name, bool changed, std::string why, std::uint64_t then, std::uint64_t at_plan) {
    if (!changed) {
      c.carried.push_back(std::move(name));
      return;
    }
    const auto d = static_cast<std::int64_t>(at_plan) - static_cast<std::int64_t>(then);
    delta += d;
    c.reestimated.push_back(fmt::format("{} ({}): {}{}", name, why, d >= 0 ? "+" : "-",
                                        format_bytes(static_cast<std::uint64_t>(d >= 0 ? d : -d))));
  };
  std::vector<std::string> why;
  auto note_change = [&](bool changed, std::string text) {
    if (changed) why.push_back(std::move(text));
    return changed;
  };
  bool peak = note_change(shape.batched_tokens != now.batched_tokens,
                          fmt::format("max_num_batched_tokens {} -> {}", shape.batched_tokens, now.batched_tokens));
  peak |= note_change(shape.max_num_seqs != now.max_num_seqs,
                      fmt::format("max_num_seqs {} -> {}", shape.max_num_seqs, now.max_num_seqs));
  peak |= note_change(shape.multimodal != now.multimodal, now.multimodal ? "mm off -> on" : "mm on -> off");
  peak |= note_change(shape.tp != now.tp, fmt::format("tp {} -> {}", shape.tp, now.tp));
  peak |= note_change(sampler_rule, "the vLLM version's sampler rule");
  auto joined = [&] {
    std::string s;
    for (const auto& w : why) s += (s.empty() ? "" : ", ") + w;
    return s;
  };
  term("profile peak", peak, joined(), est.profile_peak + est.encoder, e.profile_peak + e.encoder);
  why.clear();
  const bool nt = note_change(shape.tp != now.tp, fmt::format("tp {} -> {}", shape.tp, now.tp)) |
                  note_change(sampler_rule, "the vLLM version");
  term("non-torch memory", nt, joined(), est.non_torch, e.non_torch);
  why.clear();
  bool gr = note_change(est.cuda_graph_sizes != e.cuda_graph_sizes,
                        fmt::format("{} -> {} capture sizes", est.cuda_graph_sizes, e.cuda_graph_sizes));
  gr |= note_change(est.cuda_graphs_in_budget != e.cuda_graphs_in_budget, "graphs in / beside the budget");
  gr |= note_change(shape.enforce_eager != now.enforce_eager, "enforce_eager");
  gr |= note_change(shape.tp != now.tp, "tp");
  term("CUDA graphs", gr, joined(), est.cuda_graphs_in_budget ? est.cuda_graphs : 0,
       e.cuda_graphs_in_budget ? e.cuda_graphs : 0);
  // Beside the budget both times: the overhead moves by nothing, but the graphs do (issue 55 tryout: "+0 B" beside a
  // graph memory that went from 1.10 GiB to 418 MiB).
  if (gr && !est.cuda_graphs_in_budget && !e.cuda_graphs_in_budget)
    c.reestimated.back() += fmt::format(" in the budget; beside it the graphs go {} -> {}",
                                        format_bytes(est.cuda_graphs), format_bytes(e.cuda_graphs));
  if (c.measured) {
    const std::int64_t b = static_cast<std::int64_t>(std::min<std::uint64_t>(c.measured_bytes, INT64_MAX)) + delta;
    c.bytes = b > 0 ? static_cast<std::uint64_t>(b) : 0;
  } else {
    c.bytes = e.in_budget();
  }
  if (!log.activation_peak_bytes && !log.non_torch_bytes && !log.consumed_bytes)
    c.gaps.push_back("no memory-profiling summary: the overhead is measured as one figure, not term by term");
  add_rows(in, est, requested, kv, rules, shape, c);
  return c;
}

}  // namespace fp4forge::kvplan

namespace fp4forge::kvplan {

namespace {
std::string shown(const std::optional<double>& v, const std::string& unit) {
  if (!v) return "-";
  if (unit == "bytes") return format_bytes(util::sat_from_double(*v));
  if (unit == "x") return fmt::format("{:.2f}x", *v);
  return format_count(util::sat_from_double(*v));
}
}  // namespace

nlohmann::ordered_json to_json(const LoggedSeat& seat, const CalibratedOverhead* c) {
  using Json = nlohmann::ordered_json;
  const StartupLog& log = seat.log;
  Json j;
  j["log"] = log.path;
  j["version"] = log.version ? Json(log.version->value) : Json(nullptr);
  j["version_rules"] = seat.rules ? Json(seat.rules->version) : Json(nullptr);
  j["sliding_in_flight_batches"] = seat.sliding_in_flight_batches ? Json(*seat.sliding_in_flight_batches) : Json(nullptr);
  j["sliding_note"] = seat.sliding_note.empty() ? Json(nullptr) : Json(seat.sliding_note);
  j["refused"] = log.refused;
  if (c == nullptr) {
    j["measured"] = false;
    return j;
  }
  j["measured"] = c->measured;
  j["measured_overhead_bytes"] = c->measured ? Json(c->measured_bytes) : Json(nullptr);
  j["overhead_bytes"] = c->bytes;
  j["torch_total_bytes"] = c->torch_total ? Json(c->torch_total) : Json(nullptr);
  j["torch_total_source"] = c->total_source;
  j["gpu_memory_utilization"] = c->util;
  j["utilization_source"] = c->util_source;
  j["carried"] = c->carried;
  j["reestimated"] = c->reestimated;
  j["gaps"] = c->gaps;
  Json rows = Json::array();
  for (const auto& r : c->rows)
    rows.push_back({{"term", r.term}, {"estimate", r.estimate ? Json(*r.estimate) : Json(nullptr)},
                    {"logged", r.logged ? Json(*r.logged) : Json(nullptr)}, {"unit", r.unit}, {"where", r.line}});
  j["rows"] = rows;
  return j;
}

std::string to_text(const LoggedSeat& seat, const CalibratedOverhead* c) {
  const StartupLog& log = seat.log;
  std::string o = fmt::format("  log              {} ({}){}\n", log.path,
                              log.version ? "vLLM " + log.version->value : std::string("no version line"),
                              log.refused ? fmt::format(": vLLM refused to start (line {})", log.refused_line) : "");
  if (c != nullptr) {
    o += c->measured
             ? fmt::format("  measured         overhead {} at the logged settings (util {} of {}, from {}); planned "
                           "with {}\n", format_bytes(c->measured_bytes), c->util, format_bytes(c->torch_total),
                           c->total_source, format_bytes(c->bytes))
             : std::string("  measured         nothing: the overhead stays an estimate (see the gaps)\n");
    o += fmt::format("    {:<46} {:>15} {:>15}  {}\n", "term", "plan's estimate", "the log", "where");
    for (const auto& r : c->rows)
      o += fmt::format("    {:<46} {:>15} {:>15}  {}\n", r.term, shown(r.estimate, r.unit), shown(r.logged, r.unit), r.line);
    if (!c->carried.empty()) {
      std::string t;
      for (const auto& x : c->carried) t += (t.empty() ? "" : ", ") + x;
      o += "    carried within the measured overhead (settings unchanged): " + t + "\n";
    }
    for (const auto& x : c->reestimated) o += "    re-estimated: " + x + "\n";
    for (const auto& x : c->gaps) o += "    gap: " + x + "\n";
  }
  if (!seat.sliding_note.empty()) o += "    sliding window: " + seat.sliding_note + "\n";
  return o;
}

}  // namespace fp4forge::kvplan
