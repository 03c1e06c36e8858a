// The served KV pool (kv_pool.h): Prometheus text read as untrusted input, and the pool a plan --json expects.
#include "fp4forge/probe/kv_pool.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fp4forge/probe/probe.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/json_get.h"

namespace fp4forge::probe {

std::string PromSample::label(std::string_view key) const {
  for (const auto& [k, v] : labels)
    if (k == key) return v;
  return {};
}

namespace {

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == ':'; }

void skip_spaces(std::string_view s, std::size_t& i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
}

/** `{a="x",b="y\"z"}` from s[i] == '{'; false when malformed. Label values unescape \\, \" and \n. */
bool parse_labels(std::string_view s, std::size_t& i, std::vector<std::pair<std::string, std::string>>& out) {
  ++i;  // '{'
  for (;;) {
    skip_spaces(s, i);
    if (i < s.size() && s[i] == '}') {
      ++i;
      return true;
    }
    const std::size_t k0 = i;
    while (i < s.size() && name_char(s[i])) ++i;
    if (i == k0) return false;
    std::string key(s.substr(k0, i - k0));
    skip_spaces(s, i);
    if (i >= s.size() || s[i] != '=') return false;
    ++i;
    skip_spaces(s, i);
    if (i >= s.size() || s[i] != '"') return false;
    ++i;
    std::string value;
    for (;; ++i) {
      if (i >= s.size()) return false;  // an unterminated value: the line is cut
      if (s[i] == '"') break;
      if (s[i] == '\\') {
        if (++i >= s.size()) return false;
        value += s[i] == 'n' ? '\n' : s[i];  // \\ and \" stand for themselves
        continue;
      }
      value += s[i];
    }
    ++i;  // closing quote
    out.emplace_back(std::move(key), std::move(value));
    skip_spaces(s, i);
    if (i < s.size() && s[i] == ',') ++i;
    else if (i >= s.size() || s[i] != '}') return false;
  }
}

bool parse_value(std::string_view t, double& v) {
  if (t == "NaN") v = std::nan("");
  else if (t == "+Inf" || t == "Inf") v = HUGE_VAL;
  else if (t == "-Inf") v = -HUGE_VAL;
  else {
    const std::string z(t);  // strtod needs a terminated string; from_chars of doubles is not in every libstdc++
    char* end = nullptr;
    v = std::strtod(z.c_str(), &end);
    if (z.empty() || end != z.c_str() + z.size()) return false;
  }
  return true;
}

}  // namespace

std::vector<PromSample> prometheus_samples(std::string_view text, std::string_view name, std::size_t max_samples) {
  std::vector<PromSample> out;
  constexpr std::size_t kMaxLine = 64u << 10;
  std::size_t pos = 0;
  while (pos < text.size() && out.size() < max_samples) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > kMaxLine || line.size() < name.size() || line.compare(0, name.size(), name) != 0) continue;
    std::size_t i = name.size();
    if (i < line.size() && name_char(line[i])) continue;  // a longer name with this prefix
    PromSample s;
    s.name = std::string(name);
    if (i < line.size() && line[i] == '{' && !parse_labels(line, i, s.labels)) continue;
    skip_spaces(line, i);
    std::size_t e = i;
    while (e < line.size() && line[e] != ' ' && line[e] != '\t') ++e;
    if (e == i || !parse_value(line.substr(i, e - i), s.value)) continue;
    out.push_back(std::move(s));
  }
  return out;
}

Result<PlanKv> kv_from_plan(const std::filesystem::path& plan_json, std::string_view seat, std::string_view model) {
  const std::string where = plan_json.string();
  auto text = fs::read_file(plan_json, 64u << 20);
  if (!text.ok()) return with_file(text.error(), where);
  if (parse_server_json(*text).is_discarded())
    return make_error(Errc::BAD_INPUT, "{}: not JSON; expected the output of 'fp4forge plan --json'", where);
  const auto j = nlohmann::ordered_json::parse(*text, nullptr, false);
  if (str_of(j, "schema") != "fp4forge.plan/1" || !j.contains("seats") || !j["seats"].is_array())
    return make_error(Errc::BAD_INPUT, "{}: schema '{}', expected 'fp4forge.plan/1' with a 'seats' list (the output "
                      "of 'fp4forge plan --json')", where, str_of(j, "schema").substr(0, 80));
  std::vector<const nlohmann::ordered_json*> hits;
  std::string names;
  for (const auto& s : j["seats"]) {
    const std::string name = str_of(s, "name"), served = str_of(s, "served_name");
    names += (names.empty() ? "" : ", ") + name;
    if (!seat.empty() ? (name == seat || served == seat) : (j["seats"].size() == 1 || served == model || name == model))
      hits.push_back(&s);
  }
  if (hits.size() != 1) {
    if (hits.empty())
      return make_error(Errc::BAD_INPUT, "{}: no seat {}; seats: [{}]; expected --seat NAME naming one of them", where,
                        seat.empty() ? fmt::format("serves '{}'", model) : fmt::format("named '{}'", seat), names);
    return make_error(Errc::USAGE, "{}: {} seats serve '{}'; pass --seat NAME (seats: [{}])", where, hits.size(), model,
                      names);
  }
  const auto& s = *hits[0];
  PlanKv kv;
  kv.seat = str_of(s, "name");
  const auto placement = s.contains("placement") ? s["placement"] : nlohmann::ordered_json();
  const auto kvj = s.contains("kv") ? s["kv"] : nlohmann::ordered_json();
  const auto blocks = int_of(placement, "num_blocks");
  auto block = int_of(kvj, "attention_block_size");
  if (!block || *block <= 0) block = int_of(kvj, "min_block_size");
  if (!blocks || *blocks <= 0 || !block || *block <= 0)
    return make_error(Errc::BAD_INPUT, "{}: seat '{}' has no placement.num_blocks and kv.attention_block_size (was it "
                      "placed? plan it with --gpu); expected a placed seat", where, kv.seat);
  kv.num_blocks = *blocks;
  kv.block_size = *block;
  kv.tokens = kv.num_blocks * kv.block_size;
  return kv;
}

}  // namespace fp4forge::probe
