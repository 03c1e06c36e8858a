#include "fp4forge/kvplan/seat.h"
#include "fp4forge/kvplan/vllm_args.h"
#include "fp4forge/model/fp8_source.h"
#include "fp4forge/model/structure.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <charconv>
#include <system_error>

#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/util/did_you_mean.h"
#include "fp4forge/util/hf_cache.h"
#include "fp4forge/util/size.h"
#include "fp4forge/util/strings.h"

namespace fp4forge::kvplan {
namespace {

using util::split;

bool is_known_key(std::string_view k) {
  return k == "util" ||
         std::any_of(std::begin(kSeatKeys), std::end(kSeatKeys), [&](const SeatKey& s) { return s.key == k; });
}

/** True when `opts` looks like key=value[,key=value...]: the first key is a lower-case identifier
 * (unknown keys are then reported as such rather than read as part of DIR). */
bool looks_like_options(std::string_view opts) {
  const std::size_t eq = opts.find('=');
  if (eq == std::string_view::npos || eq == 0) return false;
  for (char c : opts.substr(0, eq))
    if (!(std::islower(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

/** Every key of kSeatKeys, comma-separated; with `values`, each as key=VALUES (seat_keys_help). */
std::string seat_key_list(bool values) {
  std::string s;
  for (const SeatKey& k : kSeatKeys) {
    if (!s.empty()) s += ", ";
    s += k.key;
    if (values && !k.values.empty()) {
      s += '=';
      s += k.values;
    }
  }
  return s;
}

/** A --seat error about one key's value: what and where; the value's expectation is in `why` (issue 55: the
 * syntax line only where the error is about the syntax, seat_syntax_error). */
Error seat_error(std::string_view text, const std::string& why) {
  return make_error(Errc::USAGE, "invalid --seat '{}': {}", text, why);
}

/** A --seat whose shape is wrong (no NAME=, a piece that is not key=value, no DIR): the syntax is the hint. */
Error seat_syntax_error(std::string_view text, const std::string& why) {
  return make_error(Errc::USAGE, "invalid --seat '{}': {}; expected NAME=DIR[:key=value,...]", text, why);
}

/** The empty value of `key`: the key named, what it takes, and what leaving it out gives. */
Error empty_value_error(std::string_view text, std::string_view key) {
  const auto it = std::find_if(std::begin(kSeatKeys), std::end(kSeatKeys), [&](const SeatKey& k) { return k.key == key; });
  std::string dflt(it->dflt);
  if (key == "vllm_version") dflt = fmt::format("{}, {}", kNewestVllm, dflt);
  return seat_error(text, fmt::format("{}= has no value; expected {}={}; hint: leave the key out for its default ({})",
                                      key, key, it->values.empty() ? "VALUE" : it->values, dflt));
}

template <typename T>
bool parse_int(std::string_view v, T& out) {
  auto r = std::from_chars(v.data(), v.data() + v.size(), out);
  return r.ec == std::errc() && r.ptr == v.data() + v.size();
}

// vLLM's human-readable integers (vllm/utils/argparse_utils.py, --max-model-len and --max-num-batched-tokens,
// from 0.8.4): a lower-case suffix is decimal (128k = 128000, 1m = 10^6; a fraction allowed, truncated), an
// upper-case one binary (128K = 131072, 1M = 2^20; no fraction); plain integers as they are.
bool parse_human_int(std::string_view v, std::int64_t& out) {
  if (parse_int(v, out)) return true;
  if (v.size() < 2) return false;
  const char suf = v.back();
  const std::string_view num = v.substr(0, v.size() - 1);
  double mult = 0;
  bool binary = false;
  switch (suf) {
    case 'k': mult = 1e3; break;
    case 'm': mult = 1e6; break;
    case 'g': mult = 1e9; break;
    case 't': mult = 1e12; break;
    case 'K': mult = 1024.0; binary = true; break;
    case 'M': mult = 1048576.0; binary = true; break;
    case 'G': mult = 1073741824.0; binary = true; break;
    case 'T': mult = 1099511627776.0; binary = true; break;
    default: return false;
  }
  for (char c : num)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || (c == '.' && !binary))) return false;
  if (num.empty() || num.front() == '.' || num.back() == '.' || std::count(num.begin(), num.end(), '.') > 1) return false;
  const double x = std::strtod(std::string(num).c_str(), nullptr) * mult;
  if (!(x >= 0.0 && x < 9.0e18)) return false;
  out = static_cast<std::int64_t>(x);
  return true;
}

// The options of DIR:OPTS: every ','- or ':'-separated piece is key=value with a lower-case key.
bool all_options(std::string_view opts) {
  if (opts.empty()) return false;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= opts.size(); ++i)
    if (i == opts.size() || opts[i] == ',' || opts[i] == ':') {
      if (!looks_like_options(opts.substr(start, i - start))) return false;
      start = i + 1;
    }
  return true;
}

// What an unknown family was sized as: the layer kinds its config names, said as built.
std::string unknown_family_note(const std::string& model_type, const KvLayout& layout) {
  const auto count = [&](LayerKind k) {
    return std::count_if(layout.layers.begin(), layout.layers.end(), [&](const LayerSpec& l) { return l.kind == k; });
  };
  const auto full = count(LayerKind::FULL), sliding = count(LayerKind::SLIDING), state = count(LayerKind::STATE);
  if (state > 0)
    return fmt::format(
        "model_type '{}' is not a known family; sized by the layer types its config names, its "
        "linear_attention layers as GatedDeltaNet state (inferred from its linear_* keys)",
        model_type);
  if (sliding > 0)
    return fmt::format(
        "model_type '{}' is not a known family; sized by its config's attention layout: {} "
        "sliding-window and {} full-attention layers",
        model_type, sliding, full);
  return fmt::format("model_type '{}' is not a known family; sized as plain full-attention layers", model_type);
}

// vLLM's derived limit (vllm/config/model.py _get_and_verify_max_len at 0.28, 017e9f4448): the configured
// length times the RoPE scaling factor, except for rope types su / longrope / llama3 (which state their own
// length) and Gemma-3; YaRN scales original_max_position_embeddings when given.
std::int64_t derived_max_model_len(const nlohmann::ordered_json& cfg, const ModelInfo& info) {
  const std::int64_t max_pos = info.max_position_embeddings;
  if (max_pos <= 0) return max_pos;
  const std::string& mt = info.text_model_type.empty() ? info.model_type : info.text_model_type;
  if (mt.rfind("gemma3", 0) == 0) return max_pos;
  const nlohmann::ordered_json& text = text_config(cfg);  // the config's reading rule (model_info.h)
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!text.contains(key) || !text[key].is_object()) continue;
    const nlohmann::ordered_json& r = text[key];
    std::string type;
    for (const char* tk : {"rope_type", "type"})
      if (r.contains(tk) && r[tk].is_string()) type = r[tk].get<std::string>();
    if (type == "su" || type == "longrope" || type == "llama3" || type.empty() || type == "default") return max_pos;
    if (!r.contains("factor") || !r["factor"].is_number()) return max_pos;
    const double f = r["factor"].get<double>();
    if (!(f > 1.0 && f < 1e6)) return max_pos;
    std::int64_t base = max_pos;
    if (type == "yarn" && r.contains("original_max_position_embeddings") && r["original_max_position_embeddings"].is_number_integer())
      base = r["original_max_position_embeddings"].get<std::int64_t>();
    return static_cast<std::int64_t>(static_cast<double>(base) * f);
  }
  return max_pos;
}

// The most tokens a seat key takes (R4-B9): 2^40 is far beyond any model's context or batch, and keeps plan's
// block counts and byte products exact (util/checked.h saturates what could still overflow).
constexpr std::int64_t kMaxSeatTokens = std::int64_t{1} << 40;
std::string too_many_tokens() {
  return fmt::format("at most {} tokens (2^40; no model's context or batch comes near it)",
                     format_count(static_cast<std::uint64_t>(kMaxSeatTokens)));
}

bool parse_double(std::string_view v, double& out) {
  if (v.empty()) return false;
  std::string s(v);
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(out);
}

bool parse_bool(std::string_view v, bool& out) {
  if (v == "on" || v == "true" || v == "1" || v == "yes") return out = true, true;
  if (v == "off" || v == "false" || v == "0" || v == "no") return out = false, true;
  return false;
}

/** The keys of calibration and replacement (async_scheduling, log, replaces, frees): nullopt for another key,
 * "" when read, else what was expected. */
std::optional<std::string> calibration_key(std::string_view key, std::string_view v, SeatArg& a) {
  if (key == "async_scheduling") {
    bool on = true;
    if (!parse_bool(v, on)) return "on or off";
    a.async_scheduling = on;
  } else if (key == "log" || key == "replaces") {
    if (v.empty()) return key == "log" ? "a vLLM start-up log file" : "the name of another --seat";
    (key == "log" ? a.log : a.replaces) = std::string(v);
  } else if (key == "frees") {
    auto sz = parse_size(v);
    if (!sz.ok()) return "a size such as 40GiB";
    a.frees = *sz;
  } else {
    return std::nullopt;
  }
  return std::string();
}

}  // namespace

std::string seat_keys_help() { return seat_key_list(true); }

namespace {

/** `rest` (DIR[:keys]) split before a `vllm_args=` key (after ',' or ':'), and that key's value: the rest of the
 * text, commas and colons included. */
std::pair<std::string_view, std::optional<std::string_view>> split_vllm_args_tail(std::string_view rest) {
  std::size_t best = std::string_view::npos;
  for (std::string_view key : {"vllm_args=", "vllm-args="})
    for (std::size_t p = rest.find(key); p != std::string_view::npos; p = rest.find(key, p + 1))
      if (p > 0 && (rest[p - 1] == ',' || rest[p - 1] == ':')) {
        best = std::min(best, p);
        break;
      }
  if (best == std::string_view::npos) return {rest, std::nullopt};
  return {rest.substr(0, best - 1), rest.substr(best + std::string_view("vllm_args=").size())};
}

Status apply_options(std::string_view text, std::string_view opts, SeatArg& a);

/** Round 4, R4-B20: when no ':' of DIR[:keys] starts a key list that parses, DIR is the whole text. Unless that is
 * a path, a key list that fails to parse after a folder (or that starts with a seat key) is the error to report,
 * not "cannot open checkpoint 'DIR:tp'". */
Status check_unread_key_list(std::string_view text, std::string_view rest) {
  std::error_code ec;
  // `DIR,key=...` (tryout O-L5: "cannot open checkpoint 'DIR,max_model_len=1024'", exit 4): the keys follow a ':'.
  if (const std::size_t comma = rest.find(','); comma != std::string_view::npos &&
                                                rest.find(':') == std::string_view::npos &&
                                                !std::filesystem::exists(std::string(rest), ec)) {
    std::string first(rest.substr(comma + 1, rest.find('=', comma + 1) - comma - 1));
    std::replace(first.begin(), first.end(), '-', '_');
    if (is_known_key(first))
      return seat_syntax_error(text, fmt::format("DIR '{}' is followed by ',{}': the key list starts after a ':' "
                                                 "(NAME=DIR:key=value,key=value)",
                                                 util::printable(rest.substr(0, comma), 120), first));
  }
  if (rest.find(':') == std::string_view::npos || std::filesystem::exists(std::string(rest), ec)) return {};
  for (std::size_t colon = rest.find(':'); colon != std::string_view::npos; colon = rest.find(':', colon + 1)) {
    const std::string_view dir = rest.substr(0, colon), tail = rest.substr(colon + 1);
    std::string first(tail.substr(0, tail.find_first_of("=,:")));
    std::replace(first.begin(), first.end(), '-', '_');
    if (!(std::filesystem::is_directory(std::string(dir), ec) || is_known_key(first))) continue;
    SeatArg scratch;
    if (tail.empty()) return seat_syntax_error(text, fmt::format("nothing follows the ':' after DIR '{}'", dir));
    auto st = apply_options(text, tail, scratch);
    if (!st.ok()) {
      Error e = std::move(st).error();
      e.message += fmt::format(" (the key list after DIR '{}')", util::printable(dir, 120));
      return e;
    }
  }
  return {};
}

/** Reads the key list `opts` (',' or ':' separated key=value pieces) into `a`; `text` is the whole --seat value
 * for messages. */
Status apply_options(std::string_view text, std::string_view opts, SeatArg& a) {
  std::vector<std::string> seen;
  std::vector<std::string_view> pieces;
  const auto parts = split(opts, ',');
  const auto digits = [](std::string_view x) {
    return !x.empty() && std::all_of(x.begin(), x.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  };
  // "util=0,5": a decimal comma reads as two keys (issue 55 tryout: "'0' is invalid", no hint).
  for (std::size_t i = 1; i < parts.size(); ++i)
    if (const std::size_t e = parts[i - 1].rfind('='); e != std::string_view::npos && digits(parts[i]) &&
                                                        digits(parts[i - 1].substr(e + 1)))
      return seat_syntax_error(text, fmt::format("'{},{}': ',' separates seat keys, so this reads as two; write the "
                                                 "decimal with a point ({}.{})", parts[i - 1], parts[i],
                                                 parts[i - 1].substr(e + 1), parts[i]));
  for (std::string_view part : parts)
    for (std::string_view kv : split(part, ':')) pieces.push_back(kv);
  for (std::string_view kv : pieces) {
    const std::size_t e = kv.find('=');
    if (e == std::string_view::npos || e == 0) return seat_syntax_error(text, fmt::format("'{}' is not key=value", kv));
    std::string key(kv.substr(0, e));
    std::replace(key.begin(), key.end(), '-', '_');  // vLLM's spelling (max-model-len) is accepted too
    const std::string_view v = kv.substr(e + 1);
    if (key == "util") key = "gpu_memory_utilization";
    if (!is_known_key(key)) {
      std::vector<std::string> known;
      for (const SeatKey& k : kSeatKeys) known.emplace_back(k.key);
      return seat_error(text, fmt::format("unknown key '{}'{} (known: {})", key, util::did_you_mean(key, known),
                                          seat_key_list(false)));
    }
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      return seat_error(text, fmt::format("key '{}' given twice", key));
    seen.push_back(key);
    if (v.empty()) return empty_value_error(text, key);
    if (std::any_of(v.begin(), v.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
      return seat_error(text, fmt::format("{}='{}' holds a control character; expected printable text", key,
                                          util::printable(v, 60)));
    a.given.push_back(key + "=" + std::string(v));
    auto bad = [&](std::string_view expected) {
      return seat_error(text, fmt::format("{}='{}' is invalid, expected {}", key, v, expected));
    };
    if (key == "max_model_len") {
      std::int64_t x = 0;
      if (!parse_human_int(v, x) || x < 1) return bad("a positive integer (tokens; 128k = 128000, 128K = 131072)");
      if (x > kMaxSeatTokens) return bad(too_many_tokens());
      a.max_model_len = x;
    } else if (key == "kv_cache_dtype") {
      auto d = parse_kv_cache_dtype(v);
      if (!d.ok())
        return bad("auto, bf16, fp8, fp8_e4m3, fp8_e5m2, fp8_per_token_head, int8_per_token_head or int4_per_token_head");
      a.kv.kv_cache_dtype = *d;
    } else if (key == "gpu_memory_utilization") {
      double x = 0;
      if (!parse_double(v, x) || x <= 0.0 || x > 1.0) return bad("a fraction in (0, 1]");
      a.gpu_memory_utilization = x;
    } else if (key == "max_num_batched_tokens") {
      std::int64_t x = 0;
      if (!parse_human_int(v, x) || x < 1) return bad("a positive integer (8k = 8000, 8K = 8192)");
      if (x > kMaxSeatTokens) return bad(too_many_tokens());
      a.max_num_batched_tokens = x;
    } else if (key == "tp") {
      if (!parse_int(v, a.kv.tp) || a.kv.tp < 1 || a.kv.tp > 64) return bad("an integer in 1..64");
    } else if (key == "prefix_caching") {
      if (!parse_bool(v, a.kv.prefix_caching)) return bad("on or off");
      a.prefix_caching_given = true;
    } else if (key == "spec_tokens") {
      if (!parse_int(v, a.kv.spec_tokens) || a.kv.spec_tokens < 0 || a.kv.spec_tokens > 64) return bad("an integer in 0..64");
    } else if (key == "mm") {
      if (!parse_bool(v, a.mm)) return bad("on or off");
    } else if (key == "assume") {
      auto s = parse_quant_scheme(v);
      if (!s.ok()) return seat_error(text, fmt::format("assume={}: {}", v, s.error().message));  // its did-you-mean
      a.assume = *s;
    } else if (key == "recipe") {
      auto r = quant::read_recipe(std::string(v));
      if (!r.ok()) return seat_error(text, fmt::format("recipe={}: {}", v, r.error().message));
      a.recipe = std::string(v);
      a.assume_rules = r->rules;
      a.assume_ignore = r->ignore;
      if (r->scheme && !a.assume) a.assume = *r->scheme;
    } else if (key == "weights" || key == "overhead") {
      auto s = parse_size(v);
      if (!s.ok()) return bad("a size such as 30GiB");
      (key == "weights" ? a.weights : a.overhead) = *s;
    } else if (key == "concurrency") {
      double x = 0;
      if (!parse_double(v, x) || x <= 0.0 || x > 1e6) return bad("a positive number of requests");
      a.concurrency = x;
    } else if (key == "gpu") {
      for (auto id : split(v, '+')) {
        if (id.empty()) return bad("GPU IDs joined by '+', e.g. 0 or 0+1");
        a.gpus.emplace_back(id);
      }
    } else if (key == "port") {
      int x = 0;
      if (!parse_int(v, x) || x < 1 || x > 65535) return bad("a port in 1..65535");
      a.port = x;
    } else if (key == "block_size") {
      if (!parse_int(v, a.kv.block_size) || a.kv.block_size < 1) return bad("a positive integer");
    } else if (key == "mamba_ssm_dtype" || key == "mamba_cache_dtype") {
      auto d = parse_state_dtype(v);
      if (!d.ok()) return bad("auto, float32, bfloat16 or float16");
      (key == "mamba_ssm_dtype" ? a.kv.mamba_ssm_cache_dtype : a.kv.mamba_cache_dtype) = *d;
    } else if (key == "hybrid_manager") {
      if (!parse_bool(v, a.kv.hybrid_kv_cache_manager)) return bad("on or off");
    } else if (key == "served_name") {
      if (v.empty()) return bad("a non-empty model name");
      a.served_name = std::string(v);
    } else if (key == "vllm_version") {
      auto r = vllm_rules(v);
      if (!r.ok()) return seat_error(text, r.error().message);
      a.vllm = std::move(*r);
      a.vllm_version_given = true;
    } else if (key == "max_num_seqs") {
      std::int64_t x = 0;
      if (!parse_int(v, x) || x < 1 || x > 2147483647) return bad("a positive integer below 2^31");
      a.max_num_seqs = x;
    } else if (key == "dtype") {
      auto d = parse_model_dtype(v);
      if (!d.ok()) return bad("auto, bfloat16, float16 or float32");
      a.kv.dtype = *d;
    } else if (key == "enforce_eager") {
      if (!parse_bool(v, a.enforce_eager)) return bad("on or off");
    } else if (key == "allow_long_max_model_len") {
      if (!parse_bool(v, a.allow_long_max_model_len)) return bad("on or off");
    } else if (key == "api_key_env") {
      const bool name_ok = !v.empty() && (std::isalpha(static_cast<unsigned char>(v[0])) || v[0] == '_') &&
                           std::all_of(v.begin(), v.end(),
                                       [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
      if (!name_ok) return bad("an environment variable's name ([A-Za-z_][A-Za-z0-9_]*), not the key itself");
      a.api_key_env = std::string(v);
    } else if (auto expected = calibration_key(key, v, a)) {
      if (!expected->empty()) return bad(*expected);
    }
  }
  return {};
}

}  // namespace

Result<SeatArg> parse_seat_arg(std::string_view text) {
  const std::size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) return seat_syntax_error(text, "missing 'NAME='");
  SeatArg a;
  a.name = std::string(text.substr(0, eq));
  if (!std::isalnum(static_cast<unsigned char>(a.name[0])))
    return seat_syntax_error(text, "NAME must start with a letter or digit");
  for (char c : a.name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
      return seat_syntax_error(text, "NAME may hold letters, digits, '.', '_' and '-' only");
  std::string_view rest = text.substr(eq + 1);
  // vllm_args= is the last key: its value (flags with spaces, commas and colons) is the rest of the text.
  const auto [head, args_text] = split_vllm_args_tail(rest);
  rest = head;
  if (args_text) {
    auto words = parse_vllm_args(*args_text);
    if (!words.ok()) return seat_error(text, words.error().message);
    a.vllm_args = std::move(*words);
    a.vllm_args_given = true;
  }
  // DIR ends at the first ':' after which everything is key=value pieces; the pieces are separated by ','
  // (documented) or ':' (as --gpu separates its keys), so both spellings work.
  std::string_view opts;
  for (std::size_t colon = rest.find(':'); colon != std::string_view::npos; colon = rest.find(':', colon + 1))
    if (all_options(rest.substr(colon + 1))) {
      opts = rest.substr(colon + 1);
      rest = rest.substr(0, colon);
      break;
    }
  if (opts.empty()) FP4FORGE_TRY(check_unread_key_list(text, rest));
  if (rest.empty()) return seat_syntax_error(text, "DIR is empty");
  a.dir = std::filesystem::path(std::string(rest));
  if (!opts.empty()) FP4FORGE_TRY(apply_options(text, opts, a));
  if (a.served_name.empty()) a.served_name = a.name;
  if (!a.recipe.empty() && !a.assume) a.assume = QuantScheme::NVFP4A16;  // quantize's default scheme
  if (a.weights && a.assume)
    return seat_error(text, fmt::format("weights=SIZE and {} exclude each other (give the quantized size as "
                                        "weights=, or drop it to size the headers)",
                                        a.recipe.empty() ? "assume=" : "recipe="));
  if (!a.replaces.empty() && a.replaces == a.name) return seat_error(text, "replaces= names the seat itself");
  if (!a.gpus.empty() && static_cast<int>(a.gpus.size()) != a.kv.tp)
    return seat_error(text, fmt::format("gpu= pins {} GPU(s) but tp={}", a.gpus.size(), a.kv.tp));
  return a;
}

Result<SeatModel> load_seat(const SeatArg& given, std::optional<std::uint64_t> global_overhead) {
  SeatArg arg = given;
  std::optional<LoggedSeat> logged;
  if (!given.log.empty()) {  // the seat's own start-up log: its options fill the keys not given (seat_log.cc)
    FP4FORGE_ASSIGN_OR_RETURN(StartupLog log, read_startup_log(given.log));
    FP4FORGE_ASSIGN_OR_RETURN(arg, merge_logged_options(given, log));
    logged = read_logged_seat(log);
  }
  SeatModel m;
  m.arg = arg;
  // DIR may be a Hugging Face repo id in the cache (util/hf_cache.h): the seat reads its snapshot.
  auto src = hf_cache::resolve(arg.dir.string());
  if (!src.ok()) {
    Error e = std::move(src).error();
    e.message = fmt::format("seat '{}': {}", arg.name, e.message);
    return with_file(std::move(e), arg.dir.string());
  }
  m.arg.dir = src->path;
  m.hub = src->hub;
  m.notes = src->warnings;
  const std::filesystem::path& dir = m.arg.dir;
  const std::string where = dir.string();
  CheckpointOptions co;
  co.require_config = true;
  // A seat with its start-up log needs no shards: the log's "Model loading took" gives its weights.
  co.require_weights = !arg.weights.has_value() && !(logged && logged->log.weights_bytes);
  auto ck = Checkpoint::open(dir, co);
  if (!ck.ok()) {
    Error e = std::move(ck).error();
    // Only a folder with no weights at all is config-only: a truncated or missing shard of a checkpoint is not
    // passed by weights= (tryout R-M2: the hint was added to those, and following it gave the same error).
    if (e.code == Errc::BAD_INPUT && !arg.weights && !holds_weight_files(dir) &&
        e.message.find("safetensors") != std::string::npos && e.message.find("weights=") == std::string::npos)
      e.message += "; hint: for a config-only folder give the weight size as weights=SIZE";
    e.message = fmt::format("seat '{}': {}", arg.name, e.message);
    return with_file(std::move(e), where);
  }
  // An error about config.json is said once: the path in front, the message without its own "config.json: ".
  auto config_error = [&](Error e) {
    constexpr std::string_view kCfg = "config.json: ";
    if (std::string_view(e.message).substr(0, kCfg.size()) == kCfg) e.message.erase(0, kCfg.size());
    e.message = fmt::format("seat '{}': {}", arg.name, e.message);
    return with_file(std::move(e), (dir / "config.json").string());
  };
  auto info = read_checkpoint_info(*ck);
  if (!info.ok()) return config_error(std::move(info).error());
  m.info = std::move(*info);
  if (arg.kv.spec_tokens > 0 && m.info.mtp_num_hidden_layers < 1)
    // Said as what was read, not as a key the family may not have (tryout T-L4: llama has no mtp_num_hidden_layers).
    return make_error(Errc::USAGE,
                      "seat '{}': spec_tokens={} needs an MTP module, but config.json declares none "
                      "(no MTP layer count: mtp_num_hidden_layers, num_nextn_predict_layers, ...); hint: drop "
                      "spec_tokens",
                      arg.name, arg.kv.spec_tokens);

  m.rules = arg.vllm;
  KvOptions ko = arg.kv;
  auto layout = build_kv_layout(m.info, ck->config(), ko);
  // Before 0.26 (inferred from merge dates) vLLM left prefix caching off for hybrid models unless asked.
  const bool has_state = layout.ok() && layout->has_state_layers();
  if (has_state && ko.prefix_caching && !arg.prefix_caching_given && !m.rules.hybrid_prefix_caching) {
    ko.prefix_caching = false;
    m.arg.kv.prefix_caching = false;
    m.notes.push_back(fmt::format("vLLM {} leaves prefix caching off for hybrid models: state layers hold one "
                                  "page per request", m.rules.version));
    layout = build_kv_layout(m.info, ck->config(), ko);
  }
  if (!layout.ok()) return config_error(std::move(layout).error());
  m.layout = std::move(*layout);
  if (m.info.family == Family::UNKNOWN) m.notes.push_back(unknown_family_note(m.info.model_type, m.layout));

  m.max_position_embeddings = m.info.max_position_embeddings;
  m.derived_max_model_len = derived_max_model_len(ck->config(), m.info);
  if (arg.max_model_len) {
    m.max_model_len = *arg.max_model_len;
    if (m.derived_max_model_len > 0 && m.max_model_len > m.derived_max_model_len) {
      const std::string what = fmt::format(
          "max_model_len {} is above the model's {} (max_position_embeddings {}{})", m.max_model_len,
          m.derived_max_model_len, m.max_position_embeddings,
          m.derived_max_model_len != m.max_position_embeddings ? " x its RoPE scaling factor" : "");
      if (arg.allow_long_max_model_len)
        m.notes.push_back(what + ": allowed by allow_long_max_model_len=on (the stack sets "
                                 "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; quality past the trained length is the model's)");
      else
        m.refusal = "vLLM refuses it: " + what + "; hint: lower max_model_len, or allow_long_max_model_len=on "
                                             "(VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)";
    }
  } else if (m.max_position_embeddings > 0) {
    m.max_model_len = m.max_position_embeddings;
  } else {
    // A key present with 0, a negative or a non-integer value is said as such (issue 55 tryout K: "has no" for 0).
    const nlohmann::ordered_json& text = text_config(ck->config());
    for (const char* key : {"max_position_embeddings", "n_positions"})
      if (const auto it = text.find(key); it != text.end() && !it->is_null())
        return make_error(Errc::BAD_INPUT,
                          "seat '{}': config.json {} is {}, not a positive integer (doctor: "
                          "config-value-unusable); give max_model_len=TOKENS",
                          arg.name, key, it->dump());
    return make_error(Errc::BAD_INPUT, "seat '{}': config.json has no max_position_embeddings; give "
                      "max_model_len=TOKENS", arg.name);
  }

  m.quantization = stored_quantization(*ck);
  if (m.arg.assume && !m.quantization.empty() && !read_fp8_source(*ck).ok()) {
    // Already quantized (fp4forge's own output, a recipe's mixed groups, GPTQ, ...): vLLM serves it as stored, and
    // assume= / recipe= size what quantize writes from a BF16 or FP8 source, which this is not (issue 55).
    m.notes.push_back(fmt::format(
        "{} does not apply: DIR is already quantized ({}) and vLLM serves it as stored; planned from its own "
        "weights (assume= and recipe= size what quantize writes from a BF16 or FP8 source)",
        m.arg.recipe.empty() ? "assume=" + std::string(quant_scheme_name(*m.arg.assume)) : "recipe=" + m.arg.recipe,
        m.quantization));
    m.arg.assume.reset();
    m.arg.recipe.clear();
    m.arg.assume_rules.clear();
    m.arg.assume_ignore.clear();
  }
  if (arg.weights) {
    m.weights_given = true;
    m.weight_bytes = *arg.weights;
  } else {
    WeightOptions wo;
    wo.include_mtp = arg.kv.spec_tokens > 0;
    wo.assume = m.arg.assume;
    wo.rules = m.arg.assume_rules;
    wo.ignore = m.arg.assume_ignore;
    m.weights = estimate_weights(*ck, m.info, wo);
    m.weight_bytes = m.weights.bytes;
    if (!m.weights.planner_note.empty()) m.notes.push_back(m.weights.planner_note);
    if (m.arg.assume && m.weights.quantized_linears == 0)
      m.notes.push_back(fmt::format("assume={} found no Linear to quantize (none eligible)",
                                    quant_scheme_name(*m.arg.assume)));
  }
  m.weight_bytes_per_rank = (m.weight_bytes + static_cast<std::uint64_t>(arg.kv.tp) - 1) /
                            static_cast<std::uint64_t>(arg.kv.tp);
  if (arg.kv.tp > 1)
    m.notes.push_back(fmt::format("tp={}: weights counted as 1/{} per GPU (replicated norms and "
                                  "embeddings padding ignored)", arg.kv.tp, arg.kv.tp));
  m.overhead = arg.overhead ? arg.overhead : global_overhead;
  for (auto& n : m.layout.notes) m.notes.push_back(n);
  if (logged) FP4FORGE_TRY(apply_logged_seat(m, std::move(*logged)));
  m.serving = plan_serving(m, *ck);
  return m;
}

}  // namespace fp4forge::kvplan
