// A seat planned from its own start-up log (seat key log=FILE): the options the log states fill the keys
// the seat did not give, and the loaded seat takes the log's weights and sliding-window reserve (seat.h).
#include <algorithm>

#include <fmt/format.h>

#include "fp4forge/kvplan/seat.h"
#include "fp4forge/util/size.h"

namespace fp4forge::kvplan {

Result<SeatArg> merge_logged_options(const SeatArg& arg, const StartupLog& log) {
  const LoggedOptions o = logged_options(log);
  std::vector<std::string> pieces = arg.given;
  auto given = [&](std::string_view key) {
    return std::any_of(arg.given.begin(), arg.given.end(), [&](const std::string& p) {
      return p.size() > key.size() && p.compare(0, key.size(), key) == 0 && p[key.size()] == '=';
    });
  };
  for (const std::string& k : o.keys)
    if (!given(std::string_view(k).substr(0, k.find('=')))) pieces.push_back(k);
  if (!given("vllm_version") && log.version) {
    const LoggedSeat ls = read_logged_seat(log);
    if (ls.rules) {
      pieces.push_back("vllm_version=" + ls.rules->version);
    } else {
      std::string v = log.version->value;
      const std::size_t end = v.find_first_not_of("0123456789.");
      auto r = vllm_rules(v.substr(0, end == std::string::npos ? v.size() : end));
      if (!r.ok())
        return make_error(Errc::USAGE, "seat '{}': log={} is from vLLM {} (line {}): {}; or give vllm_version= to plan it "
                          "under another version's rules", arg.name, arg.log, log.version->value, log.version->line,
                          r.error().message);
    }
  }
  std::string text = arg.name + "=" + arg.dir.string();
  for (std::size_t i = 0; i < pieces.size(); ++i) text += (i == 0 ? ":" : ",") + pieces[i];
  auto merged = parse_seat_arg(text);
  if (!merged.ok()) {
    Error e = std::move(merged).error();
    e.message = fmt::format("seat '{}': an option of log={} is not one plan takes: {}", arg.name, arg.log, e.message);
    return e;
  }
  merged->given = arg.given;  // what the operator gave; the rest came from the log
  return merged;
}

namespace {

/** A log whose "Model loading took" is more than kMaxWeightRatio times the seat's own weights (or less than its
 * 1/kMaxWeightRatio) is another model's: plan would carry its weights, overhead and settings onto this seat
 * (issue 55 tryout: a 9B model's log planned a 419 KiB checkpoint as 17 GiB, without a word). Inferred bound: vLLM
 * holds what the headers store plus small buffers, so the same checkpoint stays within a few per cent. */
constexpr double kMaxWeightRatio = 2.0;

/** Without a "Model loading took" line, the consumed-memory summary ("X GiB for consumed memory (weights +
 * non-torch)") bounds the weights from above: beyond 2x the seat's weights plus this much non-torch memory per GPU,
 * the log is another model's (tryout P-M1: a 27B's 15.25 GiB became a 419 KiB seat's "measured overhead"). Inferred:
 * non-torch memory (CUDA context, NCCL buffers) stays within a few GiB per GPU in the logs read
 * (docs/plan-overheads.md). */
constexpr std::uint64_t kNonTorchAllowance = 4 * kGiB;

Status check_same_model_by_consumed(const SeatModel& m, const LoggedSeat& logged) {
  const StartupLog& log = logged.log;
  if (log.weights_bytes || !log.consumed_bytes || m.weights_given || m.weights.tensors == 0 ||
      logged.tp.value_or(1) != m.arg.kv.tp)
    return {};
  const double own = static_cast<double>(m.weight_bytes_per_rank);
  const double consumed = static_cast<double>(log.consumed_bytes->value);
  if (own <= 0.0 || consumed <= own * kMaxWeightRatio + static_cast<double>(kNonTorchAllowance)) return {};
  const LoggedOptions o = logged_options(log);
  return make_error(Errc::BAD_INPUT,
                    "seat '{}': log={} is not this seat's: the vLLM it records consumed {} per GPU for weights and "
                    "non-torch memory (line {}{}), DIR '{}' holds {} of weights per GPU at tp={} (the weights alone "
                    "would be more than {:.0f}x the seat's, past {} of non-torch memory); hint: give the start-up log "
                    "of a vLLM that served DIR, or plan without log=",
                    m.arg.name, m.arg.log, format_bytes(log.consumed_bytes->value), log.consumed_bytes->line,
                    o.model.empty() ? std::string() : fmt::format(", model '{}'", o.model), m.arg.dir.string(),
                    format_bytes(m.weight_bytes_per_rank), m.arg.kv.tp, kMaxWeightRatio,
                    format_bytes(kNonTorchAllowance));
}

Status check_same_model(const SeatModel& m, const LoggedSeat& logged) {
  const StartupLog& log = logged.log;
  FP4FORGE_TRY(check_same_model_by_consumed(m, logged));
  if (!log.weights_bytes || m.weights_given || m.weights.tensors == 0 || logged.tp.value_or(1) != m.arg.kv.tp)
    return {};
  const double own = static_cast<double>(m.weight_bytes_per_rank), seen = static_cast<double>(log.weights_bytes->value);
  if (own <= 0.0 || seen <= 0.0 || (seen <= own * kMaxWeightRatio && own <= seen * kMaxWeightRatio)) return {};
  const LoggedOptions o = logged_options(log);
  return make_error(Errc::BAD_INPUT,
                    "seat '{}': log={} is not this seat's: the vLLM it records loaded {} of weights per GPU (line "
                    "{}{}), DIR '{}' holds {} per GPU at tp={} (more than {:.0f}x apart); hint: give the start-up log "
                    "of a vLLM that served DIR, or plan without log=",
                    m.arg.name, m.arg.log, format_bytes(log.weights_bytes->value), log.weights_bytes->line,
                    o.model.empty() ? std::string() : fmt::format(", model '{}'", o.model), m.arg.dir.string(),
                    format_bytes(m.weight_bytes_per_rank), m.arg.kv.tp, kMaxWeightRatio);
}

}  // namespace

Status apply_logged_seat(SeatModel& m, LoggedSeat logged) {
  FP4FORGE_TRY(check_same_model(m, logged));
  const StartupLog& log = logged.log;
  // Nothing to match the log to the seat by: said, with what it changes (tryout P-M1: another model's log became this
  // seat's "measured" overhead without a word).
  if (!log.weights_bytes && !log.consumed_bytes)
    m.notes.push_back(fmt::format(
        "log={} prints no weights figure ('Model loading took', or the consumed-memory summary): whether it is this "
        "seat's log could not be checked; the overhead it measures assumes it is (a log of another model carries that "
        "model's weights into the overhead)",
        m.arg.log));
  // max_num_batched_tokens: the args', else vLLM's default for the logged card when the log prints its total.
  if (!logged.batched && log.torch_total_bytes) {
    logged.batched = default_max_num_batched_tokens(log.torch_total_bytes->value, "");
    if (m.rules.big_gpu_batched_16k && log.torch_total_bytes->value >= 160 * kGiB) logged.batched = 16384;
  }
  measure_sliding_reserve(logged, m.layout, logged.rules ? *logged.rules : m.rules);
  if (!logged.sliding_note.empty()) m.notes.push_back("log: " + logged.sliding_note);
  if (logged.sliding_in_flight_batches && !m.arg.async_scheduling) {
    m.arg.async_scheduling = *logged.sliding_in_flight_batches == 2;
  } else if (logged.sliding_in_flight_batches && (*logged.sliding_in_flight_batches == 2) != *m.arg.async_scheduling) {
    m.notes.push_back(fmt::format("log: async_scheduling={} is given, but the log's concurrency shows the other "
                                  "sliding-window reserve", *m.arg.async_scheduling ? "on" : "off"));
  }
  const int logged_tp = logged.tp.value_or(1);
  if (log.weights_bytes && !m.arg.weights && logged_tp == m.arg.kv.tp) {
    m.weights_from_log = true;
    m.weight_bytes_per_rank = log.weights_bytes->value;
    m.weight_bytes = log.weights_bytes->value * static_cast<std::uint64_t>(m.arg.kv.tp);
  } else if (log.weights_bytes) {
    m.notes.push_back(fmt::format("log: its weights ({} per GPU at tp={}) are not carried ({}): plan's are used",
                                  format_bytes(log.weights_bytes->value), logged_tp,
                                  m.arg.weights ? "weights= is given" : fmt::format("the seat runs at tp={}", m.arg.kv.tp)));
  }
  for (const std::string& n : log.notes) m.notes.push_back("log: " + n);
  const LoggedOptions o = logged_options(log);
  if (!o.ignored.empty()) {
    std::string names;
    for (const auto& k : o.ignored) names += (names.empty() ? "" : ", ") + k;
    m.notes.push_back("log: args plan does not model or that change no memory figure: " + names);
  }
  m.logged = std::move(logged);
  return {};
}

}  // namespace fp4forge::kvplan
