// A vLLM start-up log, read line by line (startup_log.h). Every pattern here is one line format vLLM prints;
// docs/plan-overheads.md ("Calibration from the seat's log") lists them with the versions that print them.
#include "fp4forge/kvplan/startup_log.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "fp4forge/util/checked.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/regex.h"
#include "fp4forge/util/strings.h"

namespace fp4forge::kvplan {
namespace {

using Json = nlohmann::json;

// A number as vLLM prints it (thousands separators allowed) and a size unit.
constexpr std::string_view kNum = R"(([0-9][0-9,]*(?:\.[0-9]+)?))";
constexpr std::string_view kUnit = R"(\s*(GiB|GB|MiB|MB|KiB|KB|B)\b)";

double number(std::string_view s) {
  std::string t;
  for (char c : s)
    if (c != ',') t += c;
  return std::strtod(t.c_str(), nullptr);
}

/** Bytes of "<num> <unit>": vLLM divides by 2^30 and has labelled it "GB" as well as "GiB"; so do both here. */
std::uint64_t bytes_of(std::string_view num, std::string_view unit) {
  double mult = 1.0;
  if (unit == "GiB" || unit == "GB") mult = 1073741824.0;
  else if (unit == "MiB" || unit == "MB") mult = 1048576.0;
  else if (unit == "KiB" || unit == "KB") mult = 1024.0;
  return util::sat_from_double(std::round(number(num) * mult));
}

/** A compiled pattern and its captures in one line. */
struct Pattern {
  Regex re;
  explicit Pattern(std::string_view p) : re(*Regex::compile(p)) {}
  /** The captures of the first match (empty when none), as views of `line`. */
  std::vector<std::string_view> match(std::string_view line) const {
    const auto all = re.find_all(line);
    if (all.empty()) return {};
    std::vector<std::string_view> out;
    const auto& m = all.front();
    for (std::size_t g = 0; g < m.begin.size(); ++g)
      out.push_back(m.begin[g] == std::string_view::npos ? std::string_view()
                                                         : line.substr(m.begin[g], m.end[g] - m.begin[g]));
    return out;
  }
};

std::string with(std::string_view p) {
  std::string s(p);
  for (std::string_view key : {std::string_view("NUM"), std::string_view("UNIT")}) {
    std::size_t at = 0;
    while ((at = s.find(key, at)) != std::string::npos) {
      const std::string_view rep = key == "NUM" ? kNum : kUnit;
      s.replace(at, key.size(), rep);
      at += rep.size();
    }
  }
  return s;
}

struct Patterns {
  Pattern ansi{R"(\x1b\[[0-9;]*[A-Za-z])"};
  Pattern version{R"((?:vLLM API server version|Initializing a V1 LLM engine \(v|\bversion)\s*v?([0-9]+\.[0-9]+(?:\.[0-9]+)?[0-9A-Za-z.+_-]*))"};
  Pattern args{R"(non-default args:\s*(\{.*\})\s*$)"};
  Pattern weights{with(R"(Model loading took NUMUNIT)")};
  Pattern avail{with(R"(Available KV cache memory:\s*NUMUNIT)")};
  Pattern tokens{R"(GPU KV cache size:\s*([0-9][0-9,]*) tokens)"};
  Pattern conc{R"([Mm]aximum concurrency for ([0-9][0-9,]*) tokens per request:\s*([0-9][0-9,]*(?:\.[0-9]+)?)x)"};
  Pattern graph_est{with(R"(Estimated CUDA graph memory:\s*NUMUNIT)")};
  Pattern graph_took{with(R"(Graph capturing finished in [0-9.]+ secs?, took NUMUNIT)")};
  Pattern graph_pool{with(R"(CUDA graph pool memory:\s*NUMUNIT \(actual\))")};
  Pattern free_mem{with(R"(Free memory on device[^(]*\(NUM/NUMUNIT\) on startup(\s+is less than)?[^(]*\(NUM,\s*NUMUNIT\))")};
  Pattern total_x_util{with(R"(total_gpu_memory \(NUMUNIT\) x gpu_memory_utilization \(NUM\) = NUMUNIT)")};
  Pattern v0_summary{with(
      R"(model weights take NUMUNIT; non_torch_memory takes NUMUNIT; PyTorch activation peak memory takes NUMUNIT(?:; the rest of the memory reserved for KV Cache is NUMUNIT)?)")};
  Pattern kv_eq{with(R"(\b(total_gpu_memory|non_torch_memory|kv_cache_size)=NUMUNIT)")};
  Pattern util_eq{R"(\bgpu_memory_utilization=([0-9.]+))"};
  Pattern usage_item{with(R"(NUMUNIT for (consumed memory|weights?|peak activation|non-torch memory|CUDAGraph memory))")};
  Pattern kv_fit{R"(--kv-cache-memory=([0-9]+)`?\s*(?:\([^)]*\))?\s*to fit into requested memory)"};
  Pattern util_equiv{R"(The current --gpu-memory-utilization=([0-9.]+) is equivalent to)"};
  Pattern kv_in_use{with(R"(Current kv cache memory in use is NUMUNIT)")};
  Pattern snapshot{with(R"(memory snapshot:.*\bfree_memory=NUMUNIT, total_memory=NUMUNIT)")};
  Pattern requested{with(R"(worker requested memory:\s*NUMUNIT)")};
  Pattern blocks{R"(num_gpu_blocks is:\s*([0-9]+))"};
  Pattern batched{R"((?:Chunked prefill is enabled with max_num_batched_tokens=|Defaulting max_num_batched_tokens to )([0-9]+))"};
  Pattern seqs{R"(Defaulting max_num_seqs to ([0-9]+))"};
  Pattern async{R"(Asynchronous scheduling is (enabled|disabled))"};
};

const Patterns& patterns() {
  static const Patterns p;
  return p;
}

/** Keeps the first value, or the tighter one (`prefer_max`: the larger) when ranks print different figures. */
template <typename T>
void keep(std::optional<LoggedValue<T>>& slot, T v, std::size_t line, bool prefer_max, std::string_view what,
          StartupLog& log) {
  if (!slot) {
    slot = LoggedValue<T>{v, line};
    return;
  }
  if (slot->value == v) return;
  const bool better = prefer_max ? v > slot->value : v < slot->value;
  log.notes.push_back(fmt::format("lines {} and {} print different {} (ranks differ); the {} is kept", slot->line,
                                  line, what, prefer_max ? "largest" : "smallest"));
  if (better) slot = LoggedValue<T>{v, line};
}

// --- Python's repr of the non-default args -------------------------------------------------------------

struct Repr {
  std::string_view s;
  std::size_t i = 0;
  void ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  /** Text up to the next ',' / '}' / ']' at this depth: a value plan does not read, kept as its text. */
  Json raw() {
    const std::size_t start = i;
    int depth = 0;
    char quote = 0;
    for (; i < s.size(); ++i) {
      const char c = s[i];
      if (quote) {
        if (c == '\\') ++i;
        else if (c == quote) quote = 0;
        continue;
      }
      if (c == '\'' || c == '"') quote = c;
      else if (c == '(' || c == '[' || c == '{' || c == '<') ++depth;
      else if (c == ')' || c == ']' || c == '}' || c == '>') {
        if (depth == 0) break;
        --depth;
      } else if (c == ',' && depth == 0) {
        break;
      }
    }
    return std::string(util::trim(s.substr(start, i - start)));
  }
  std::optional<Json> value() {
    ws();
    if (i >= s.size()) return std::nullopt;
    const char c = s[i];
    if (c == '{' || c == '[') return container(c);
    if (c == '\'' || c == '"') return str();
    for (auto [word, v] : {std::pair<std::string_view, Json>{"True", true}, {"False", false}, {"None", nullptr}})
      if (s.substr(i, word.size()) == word &&
          (i + word.size() == s.size() || !std::isalnum(static_cast<unsigned char>(s[i + word.size()])))) {
        i += word.size();
        return v;
      }
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      const std::size_t start = i;
      ++i;
      while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.' || s[i] == 'e' ||
                              s[i] == 'E' || s[i] == '-' || s[i] == '+'))
        ++i;
      const std::string t(s.substr(start, i - start));
      if (t.find_first_of(".eE") == std::string::npos) {
        char* end = nullptr;
        const long long v = std::strtoll(t.c_str(), &end, 10);
        if (end == t.c_str() + t.size()) return Json(static_cast<std::int64_t>(v));
      }
      return Json(std::strtod(t.c_str(), nullptr));
    }
    return raw();
  }
  std::optional<Json> str() {
    const char q = s[i++];
    std::string out;
    while (i < s.size() && s[i] != q) {
      if (s[i] == '\\' && i + 1 < s.size()) ++i;
      out += s[i++];
    }
    if (i >= s.size()) return std::nullopt;
    ++i;
    return Json(out);
  }
  std::optional<Json> container(char open) {
    const char close = open == '{' ? '}' : ']';
    ++i;
    Json out = open == '{' ? Json::object() : Json::array();
    for (;;) {
      ws();
      if (i >= s.size()) return std::nullopt;
      if (s[i] == close) {
        ++i;
        return out;
      }
      if (open == '{') {
        auto k = value();
        ws();
        if (!k || i >= s.size() || s[i] != ':') return std::nullopt;
        ++i;
        auto v = value();
        if (!v) return std::nullopt;
        out[k->is_string() ? k->get<std::string>() : k->dump()] = std::move(*v);
      } else {
        auto v = value();
        if (!v) return std::nullopt;
        out.push_back(std::move(*v));
      }
      ws();
      if (i < s.size() && s[i] == ',') ++i;
    }
  }
};

/** The profiling summary lines of 0.8 - 0.10 and the "--kv-cache-memory" suggestion of 0.11+. */
void read_memory_summary(std::string_view line, std::size_t n, StartupLog& log) {
  const Patterns& P = patterns();
  if (auto m = P.total_x_util.match(line); !m.empty()) {
    keep(log.torch_total_bytes, bytes_of(m[1], m[2]), n, false, "totals", log);
    keep(log.util, number(m[3]), n, false, "utilizations", log);
    keep(log.requested_bytes, bytes_of(m[4], m[5]), n, false, "requested memory", log);
  }
  if (auto m = P.v0_summary.match(line); !m.empty()) {
    keep(log.weights_bytes, bytes_of(m[1], m[2]), n, true, "weights", log);
    if (!m[7].empty()) keep(log.available_kv_bytes, bytes_of(m[7], m[8]), n, false, "KV memory", log);
    keep(log.non_torch_bytes, bytes_of(m[3], m[4]), n, true, "non-torch memory", log);
    keep(log.activation_peak_bytes, bytes_of(m[5], m[6]), n, true, "activation peaks", log);
  }
  const bool v0_results = line.find("Memory profiling results") != std::string_view::npos;
  for (const auto& mm : v0_results ? P.kv_eq.re.find_all(line) : std::vector<Regex::Match>{}) {
    // V0 "Memory profiling results: total_gpu_memory=... non_torch_memory=... kv_cache_size=..." (the 0.19+
    // start-up snapshot prints non_torch_memory= too: there it is the CUDA context, so only this line counts)
    auto g = [&](std::size_t k) { return line.substr(mm.begin[k], mm.end[k] - mm.begin[k]); };
    const std::uint64_t b = bytes_of(g(2), g(3));
    if (g(1) == "total_gpu_memory") keep(log.torch_total_bytes, b, n, false, "totals", log);
    else if (g(1) == "non_torch_memory") keep(log.non_torch_bytes, b, n, true, "non-torch memory", log);
    else keep(log.available_kv_bytes, b, n, false, "KV memory", log);
  }
  if (v0_results)
    if (auto m = P.util_eq.match(line); !m.empty()) keep(log.util, number(m[1]), n, false, "utilizations", log);
  if (line.find("Actual usage") != std::string_view::npos) {
    for (const auto& mm : P.usage_item.re.find_all(line)) {
      auto g = [&](std::size_t k) { return line.substr(mm.begin[k], mm.end[k] - mm.begin[k]); };
      const std::uint64_t b = bytes_of(g(1), g(2));
      const std::string_view what = g(3);
      if (what == "consumed memory") keep(log.consumed_bytes, b, n, true, "consumed memory", log);
      else if (what == "peak activation") keep(log.activation_peak_bytes, b, n, true, "activation peaks", log);
      else if (what == "non-torch memory") keep(log.non_torch_bytes, b, n, true, "non-torch memory", log);
      else if (what == "CUDAGraph memory") keep(log.graph_captured_bytes, b, n, true, "CUDA graph memory", log);
      else keep(log.weights_bytes, b, n, true, "weights", log);
    }
  }
  if (auto m = P.kv_fit.match(line); !m.empty())
    keep(log.kv_fit_bytes, static_cast<std::uint64_t>(number(m[1])), n, false, "KV memory (exact)", log);
}

void read_line(std::string_view line, std::size_t n, StartupLog& log) {
  const Patterns& P = patterns();
  if (!log.version)
    if (auto m = P.version.match(line); !m.empty()) log.version = LoggedValue<std::string>{std::string(m[1]), n};
  if (log.args.is_null())
    if (auto m = P.args.match(line); !m.empty()) {
      if (auto j = parse_python_repr(m[1])) {
        log.args = std::move(*j);
        log.args_line = n;
      } else {
        log.notes.push_back(fmt::format("line {}: the non-default args could not be read (cut off?)", n));
      }
    }
  if (auto m = P.weights.match(line); !m.empty()) keep(log.weights_bytes, bytes_of(m[1], m[2]), n, true, "weights", log);
  if (auto m = P.avail.match(line); !m.empty())
    keep(log.available_kv_bytes, bytes_of(m[1], m[2]), n, false, "KV memory", log);
  if (auto m = P.tokens.match(line); !m.empty())
    keep(log.kv_cache_tokens, static_cast<std::int64_t>(number(m[1])), n, false, "KV cache sizes", log);
  if (auto m = P.conc.match(line); !m.empty()) {
    keep(log.concurrency_tokens, static_cast<std::int64_t>(number(m[1])), n, false, "request lengths", log);
    keep(log.max_concurrency, number(m[2]), n, false, "concurrencies", log);
  }
  if (auto m = P.graph_est.match(line); !m.empty())
    keep(log.graph_estimate_bytes, bytes_of(m[1], m[2]), n, true, "CUDA graph estimates", log);
  if (auto m = P.graph_took.match(line); !m.empty())
    keep(log.graph_captured_bytes, bytes_of(m[1], m[2]), n, true, "CUDA graph memory", log);
  if (auto m = P.graph_pool.match(line); !m.empty())
    keep(log.graph_captured_bytes, bytes_of(m[1], m[2]), n, true, "CUDA graph memory", log);
  if (auto m = P.free_mem.match(line); !m.empty()) {
    keep(log.free_at_start_bytes, bytes_of(m[1], m[3]), n, false, "free memory", log);
    keep(log.torch_total_bytes, bytes_of(m[2], m[3]), n, false, "totals", log);
    keep(log.util, number(m[5]), n, false, "utilizations", log);
    keep(log.requested_bytes, bytes_of(m[6], m[7]), n, false, "requested memory", log);
    if (!m[4].empty() && !log.refused) {
      log.refused = true;
      log.refused_line = n;
    }
  }
  if (auto m = P.util_equiv.match(line); !m.empty()) keep(log.util, number(m[1]), n, false, "utilizations", log);
  if (auto m = P.kv_in_use.match(line); !m.empty())
    keep(log.available_kv_bytes, bytes_of(m[1], m[2]), n, false, "KV memory", log);
  if (auto m = P.snapshot.match(line); !m.empty()) {
    keep(log.free_at_start_bytes, bytes_of(m[1], m[2]), n, false, "free memory", log);
    keep(log.torch_total_bytes, bytes_of(m[3], m[4]), n, false, "totals", log);
  }
  if (auto m = P.requested.match(line); !m.empty())
    keep(log.requested_bytes, bytes_of(m[1], m[2]), n, false, "requested memory", log);
  if (auto m = P.blocks.match(line); !m.empty())
    keep(log.num_gpu_blocks, static_cast<std::int64_t>(number(m[1])), n, false, "block counts", log);
  if (auto m = P.batched.match(line); !m.empty())
    keep(log.batched, static_cast<std::int64_t>(number(m[1])), n, false, "max_num_batched_tokens", log);
  if (auto m = P.seqs.match(line); !m.empty())
    keep(log.max_num_seqs, static_cast<std::int64_t>(number(m[1])), n, false, "max_num_seqs", log);
  if (auto m = P.async.match(line); !m.empty()) keep(log.async_scheduling, m[1] == "enabled", n, false, "async scheduling", log);
  read_memory_summary(line, n, log);
}

}  // namespace

bool StartupLog::empty() const noexcept {
  return !version && args.is_null() && !weights_bytes && !available_kv_bytes && !kv_fit_bytes && !kv_cache_tokens &&
         !max_concurrency && !graph_estimate_bytes && !graph_captured_bytes && !torch_total_bytes && !util &&
         !non_torch_bytes && !activation_peak_bytes && !consumed_bytes && !refused && !num_gpu_blocks;
}

std::optional<Json> parse_python_repr(std::string_view text) {
  Repr r{util::trim(text)};
  if (r.s.empty() || r.s.front() != '{') return std::nullopt;
  auto v = r.value();
  if (!v || !v->is_object()) return std::nullopt;
  return v;
}

StartupLog parse_startup_log(std::string_view text) {
  StartupLog log;
  const Patterns& P = patterns();
  std::size_t n = 0;
  for (std::string_view raw : util::split(text, '\n')) {
    ++n;
    std::string line(raw);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find('\x1b') != std::string::npos) {  // ANSI colours
      std::string clean;
      std::size_t at = 0;
      for (const auto& m : P.ansi.re.find_all(line)) {
        clean.append(line, at, m.begin[0] - at);
        at = m.end[0];
      }
      clean.append(line, at, std::string::npos);
      line = std::move(clean);
    }
    read_line(line, n, log);
  }
  return log;
}

Result<StartupLog> read_startup_log(const std::string& path, std::string_view label) {
  auto text = fs::read_file(path, 64u << 20);
  if (!text.ok()) {
    Error e = std::move(text).error();
    e.message = fmt::format("{}{}: {}", label, path, e.message);
    return e;
  }
  StartupLog log = parse_startup_log(*text);
  log.path = path;
  if (log.empty())
    return with_file(make_error(Errc::BAD_INPUT,
                                "{}{}: no vLLM start-up line found (expected lines such as 'Model loading took', "
                                "'Available KV cache memory', 'GPU KV cache size', 'Maximum concurrency for'); hint: "
                                "give the engine's own log (docker logs SEAT), from its start to 'Application startup "
                                "complete'",
                                label, path),
                     path);
  // A log cut short reads like one whose vLLM prints less (issue 55 tryout: `head -c` of a log gave "not printed by
  // this version"): a last line without its newline, or the weights loaded and no KV-cache line after them.
  const auto n = static_cast<std::size_t>(std::count(text->begin(), text->end(), '\n')) +
                 (!text->empty() && text->back() != '\n' ? 1 : 0);  // the last line's number
  if (!text->empty() && text->back() != '\n')
    log.notes.push_back(
        fmt::format("the log ends mid-line (line {} has no newline: cut?); what it does not show "
                    "is absent from it, not unprinted by vLLM",
                    n));
  else if (log.weights_bytes && !log.available_kv_bytes && !log.kv_cache_tokens && !log.num_gpu_blocks && !log.refused)
    log.notes.push_back(
        fmt::format("the log ends (line {}) after the weights loaded and before any KV-cache line: "
                    "cut? a whole start-up log runs to 'Application startup complete'",
                    n));
  return log;
}

namespace {

std::string arg_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "on" : "off";
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  if (v.is_number()) return fmt::format("{}", v.get<double>());
  return v.dump();
}

}  // namespace

LoggedOptions logged_options(const StartupLog& log) {
  LoggedOptions o;
  if (!log.args.is_object()) return o;
  // vLLM's argument names, in kSeatKeys order, and the seat key each becomes.
  static constexpr std::pair<std::string_view, std::string_view> kDirect[] = {
      {"max_model_len", "max_model_len"}, {"kv_cache_dtype", "kv_cache_dtype"},
      {"gpu_memory_utilization", "gpu_memory_utilization"}, {"max_num_batched_tokens", "max_num_batched_tokens"},
      {"tensor_parallel_size", "tp"}, {"enable_prefix_caching", "prefix_caching"}, {"block_size", "block_size"},
      {"mamba_ssm_cache_dtype", "mamba_ssm_dtype"}, {"mamba_cache_dtype", "mamba_cache_dtype"},
      {"max_num_seqs", "max_num_seqs"}, {"enforce_eager", "enforce_eager"}, {"dtype", "dtype"},
      {"async_scheduling", "async_scheduling"}};
  for (const auto& [name, v] : log.args.items()) {
    if (name == "model" || name == "model_tag") {
      if (v.is_string() && (o.model.empty() || name == "model")) o.model = v.get<std::string>();
      continue;
    }
    if (name == "served_model_name") {
      if (v.is_string()) o.served_name = v.get<std::string>();
      else if (v.is_array() && !v.empty() && v[0].is_string()) o.served_name = v[0].get<std::string>();
      continue;
    }
    const auto d = std::find_if(std::begin(kDirect), std::end(kDirect), [&](const auto& p) { return p.first == name; });
    if (d != std::end(kDirect) && !v.is_null() && !v.is_object() && !v.is_array()) {
      o.keys.push_back(fmt::format("{}={}", d->second, arg_text(v)));
    } else if (name == "disable_hybrid_kv_cache_manager" && v.is_boolean()) {
      o.keys.push_back(std::string("hybrid_manager=") + (v.get<bool>() ? "off" : "on"));
    } else if (name == "language_model_only" && v.is_boolean() && v.get<bool>()) {
      o.keys.push_back("mm=off");
    } else if (name == "limit_mm_per_prompt" && v.is_object()) {
      const bool none = std::all_of(v.begin(), v.end(), [](const Json& x) { return x.is_number() && x == 0; });
      if (none && !v.empty()) o.keys.push_back("mm=off");
    } else if (name == "speculative_config" && v.is_object() && v.contains("num_speculative_tokens") &&
               v["num_speculative_tokens"].is_number_integer() && v.contains("method") && v["method"].is_string() &&
               v["method"].get<std::string>().find("mtp") != std::string::npos) {
      o.keys.push_back(fmt::format("spec_tokens={}", v["num_speculative_tokens"].get<int>()));
    } else {
      o.ignored.push_back(name);
    }
  }
  return o;
}

}  // namespace fp4forge::kvplan
