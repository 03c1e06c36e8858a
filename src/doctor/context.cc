#include <cmath>

#include "checks.h"
#include "fp4forge/model/quant_config.h"
#include "fp4forge/model/structure.h"
#include "fp4forge/util/fs.h"

namespace fp4forge::doctor {

bool Context::any_with_prefix(std::string_view prefix) const {
  auto it = tensors.lower_bound(prefix);
  return it != tensors.end() && std::string_view(it->first).substr(0, prefix.size()) == prefix;
}

std::optional<std::pair<std::int64_t, std::int64_t>> Context::linear_shape(const std::string& module) const {
  if (const auto* t = tensor(module + ".weight"); t != nullptr && t->shape.size() == 2)
    return std::make_pair(static_cast<std::int64_t>(t->shape[0]), static_cast<std::int64_t>(t->shape[1]));
  if (const auto* t = tensor(module + ".weight_packed"); t != nullptr && t->shape.size() == 2)
    return std::make_pair(static_cast<std::int64_t>(t->shape[0]), std::int64_t{-1});
  return std::nullopt;
}

std::optional<std::int64_t> Context::text_int(std::string_view key) const {
  const Json& t = text();
  if (!t.is_object()) return std::nullopt;
  auto it = t.find(key);
  if (it == t.end()) return std::nullopt;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (it->is_number_float()) {
    const double d = it->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e18) return static_cast<std::int64_t>(d);
  }
  return std::nullopt;
}

std::vector<std::string> Context::text_path(std::string_view key) const {
  if (info.wrapper) return {"text_config", std::string(key)};
  return {std::string(key)};
}

Status init_context(Context& ctx) {
  auto info = read_model_info(ctx.config);
  if (!info.ok()) return with_file(info.error(), (ctx.dir / "config.json").string());
  ctx.info = std::move(*info);
  {
    std::vector<NamedShape> named;
    named.reserve(ctx.tensors.size());
    for (const auto& [name, meta] : ctx.tensors) named.push_back({name, meta.shape});
    read_structure_into(ctx.info, named);
  }
  // The first of the family's text prefixes (the registry) that the tensors use, else the text stack the
  // tensors show (read_structure), whatever its root and container.
  ctx.text_prefix = ctx.info.text_prefix;
  ctx.layer_prefix.clear();
  for (auto p : ctx.info.spec().text_prefixes)
    if (ctx.any_with_prefix(std::string(p) + "layers.")) {
      ctx.text_prefix = std::string(p);
      ctx.layer_prefix = ctx.text_prefix + "layers.";
      break;
    }
  if (ctx.layer_prefix.empty() && !ctx.info.text_container.empty()) {
    ctx.text_prefix = ctx.info.text_root;
    ctx.layer_prefix = ctx.info.text_root + ctx.info.text_container + ".";
  }
  // Quantized: a quantization_config, or a scheme's tensors on disk (`weight_packed` of the 4-bit schemes,
  // `weight_scale` of every scheme: FP8 keeps its payload in `weight`).
  ctx.quantized = find_quant_config(ctx.config) != nullptr;
  for (const auto& [name, meta] : ctx.tensors) {
    if (name.ends_with(".weight_packed") || name.ends_with(".weight_scale")) {
      ctx.quantized = true;
      break;
    }
  }
  return {};
}

Status fill_context(Context& ctx, const Checkpoint& ckpt) {
  ctx.dir = ckpt.dir();
  ctx.tokenizer_dir = ctx.dir;
  ctx.config = ckpt.config();
  ctx.tensors.clear();
  for (const auto& t : ckpt.tensors())
    ctx.tensors.emplace(t.name, TensorMeta{std::string(dtype_name(t.info->dtype)), t.info->shape});
  ctx.ckpt = ctx.tensors.empty() ? nullptr : &ckpt;
  return init_context(ctx);
}

Result<std::optional<Json>> read_json_file(const std::filesystem::path& p) {
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) return std::optional<Json>{};
  FP4FORGE_ASSIGN_OR_RETURN(std::string text, fs::read_file(p));
  FP4FORGE_ASSIGN_OR_RETURN(Json j, parse_json_bounded(text, p.filename().string()));
  return std::optional<Json>(std::move(j));
}

bool bool_of(const Json& j, std::string_view key) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

std::optional<std::int64_t> int_of(const Json& j, std::string_view key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<std::int64_t>();
}

bool has_non_null(const Json& j, std::string_view key) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  return it != j.end() && !it->is_null();
}

bool same_json(const Json& a, const Json& b) {
  return nlohmann::json::parse(a.dump()) == nlohmann::json::parse(b.dump());
}

std::size_t cap_names(std::vector<std::string>& names, std::size_t n) {
  if (names.size() <= n) return 0;
  const std::size_t left = names.size() - n;
  names.resize(n);
  return left;
}

std::vector<Finding> run_checks(const Context& ctx) {
  std::vector<Finding> out;
  check_architecture(ctx, out);
  check_gemma4_globals(ctx, out);
  check_config_shapes(ctx, out);
  check_modalities(ctx, out);
  check_mtp(ctx, out);
  check_processor(ctx, out);
  check_tokenizer(ctx, out);
  check_quantized(ctx, out);
  check_fp8_claims(ctx, out);
  return out;
}

}  // namespace fp4forge::doctor
