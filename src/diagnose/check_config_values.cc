// config-value-unusable: config values vLLM or transformers cannot build the model from, whose keys are present
// (issue 55 tryout K: rope_type "bogus", yarn without its factor, rope_theta -1 and max_position_embeddings 0 were
// all "no findings"). Warnings: each names what it could not be sure of.
#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "checks.h"

namespace fp4forge::doctor {

namespace {

/** rope types whose parameters transformers' rope validation knows, with the keys each requires
 * (transformers modeling_rope_utils, `_check_received_keys`: a missing one raises when the config loads). */
struct RopeType {
  std::string_view name;
  std::array<std::string_view, 4> required;
};
constexpr RopeType kRopeTypes[] = {
    {"default", {}},
    {"linear", {"factor"}},
    {"dynamic", {"factor"}},
    {"yarn", {"factor"}},
    {"longrope", {"short_factor", "long_factor"}},
    {"llama3", {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}},
    // Known by name, parameters not checked here: vLLM's and model-specific forms.
    {"proportional", {}},
    {"mrope", {}},
    {"su", {}},
    {"deepseek_yarn", {}},
    {"llama4", {}},
    {"axial", {}},
};

std::string known_rope_types() {
  std::string s;
  for (const RopeType& t : kRopeTypes) s += (s.empty() ? "" : ", ") + std::string(t.name);
  return s;
}

void add_unusable(FindingSink& out, const std::string& where, std::string msg, std::string expected, std::string actual,
                  std::string hint) {
  out.add(finding_kind("config-value-unusable"), {.message = std::move(msg),
                                                  .key = where,
                                                  .expected = std::move(expected),
                                                  .actual = std::move(actual),
                                                  .hint = std::move(hint)});
}

/** `rope_theta` of a block or of the text config: a positive number when present. */
void check_theta(const Json& r, const std::string& where, FindingSink& out) {
  if (const auto it = r.find("rope_theta"); it != r.end() && !(it->is_number() && it->get<double>() > 0.0))
    add_unusable(out, where + ".rope_theta",
                 fmt::format("{}.rope_theta is {}: the rotary frequencies are theta^(-2i/d), which a non-positive or "
                             "non-numeric theta makes NaN or infinite",
                             where, it->dump()),
                 "a number > 0", it->dump(), "restore rope_theta from the release's config.json");
}

/** One rope block (`rope_parameters`, `rope_scaling`, or one layer type's entry of a per-layer-type block). */
void check_rope_block(const Json& r, const std::string& where, FindingSink& out) {
  if (!r.is_object()) return;
  const auto add = [&](std::string msg, std::string expected, std::string actual, std::string hint) {
    add_unusable(out, where, std::move(msg), std::move(expected), std::move(actual), std::move(hint));
  };
  check_theta(r, where, out);
  std::string type = str_of(r, "rope_type");
  if (type.empty()) type = str_of(r, "type");  // the older spelling
  if (type.empty()) return;
  const RopeType* known = nullptr;
  for (const RopeType& t : kRopeTypes)
    if (t.name == type) known = &t;
  if (known == nullptr) {
    add(fmt::format(
            "{}.rope_type '{}' is not one fp4forge knows ({}): its parameters were not checked; vLLM's get_rope "
            "raises at start-up for a type it does not implement (inferred: not read at a tag here)",
            where, type, known_rope_types()),
        "a rope type vLLM implements", type, "check the name against the release's config.json");
    return;
  }
  std::string missing;
  for (std::string_view k : known->required)
    if (!k.empty() && r.find(std::string(k)) == r.end()) missing += (missing.empty() ? "" : ", ") + std::string(k);
  if (!missing.empty())
    add(fmt::format("{} (rope_type '{}') lacks {}: transformers' rope validation refuses it when the config loads "
                    "(modeling_rope_utils, missing required keys), so vLLM cannot start (inferred)",
                    where, type, missing),
        fmt::format("{} present", missing), "absent", "restore the rope block from the release's config.json");
}

}  // namespace

void check_config_values(const Context& ctx, FindingSink& out) {
  const Json& tc = ctx.text();
  if (!tc.is_object()) return;
  const std::string prefix = &tc == &ctx.config ? std::string() : std::string("text_config.");
  for (const char* key : {"max_position_embeddings", "n_positions"}) {
    const auto it = tc.find(key);
    if (it == tc.end() || it->is_null()) continue;
    if (const auto v = integral_of(tc, key); v && *v > 0) continue;
    out.add(finding_kind("config-value-unusable"),
            {.message = fmt::format("{}{} is {}: vLLM derives the default max_model_len from it (inferred: a seat "
                                    "without --max-model-len gets no usable context length)",
                                    prefix, key, it->dump()),
             .key = prefix + key,
             .expected = "a positive integer",
             .actual = it->dump(),
             .hint = "restore it from the release's config.json, or serve with --max-model-len"});
  }
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!tc.contains(key)) continue;
    const Json& block = tc.at(key);
    if (!block.is_object() || block.empty()) continue;
    // transformers 5's per-layer-type form: {"full_attention": {...}, "sliding_attention": {...}}.
    bool per_type = true;
    for (const auto& [lt, v] : block.items()) per_type = per_type && v.is_object();
    if (per_type) {
      for (const auto& [lt, v] : block.items()) check_rope_block(v, fmt::format("{}{}.{}", prefix, key, lt), out);
    } else {
      check_rope_block(block, prefix + key, out);
    }
  }
  check_theta(tc, prefix.empty() ? std::string("config") : prefix.substr(0, prefix.size() - 1), out);
}

}  // namespace fp4forge::doctor
