// The shape rules' context (model/shape_rules.h): ModelInfo, the structure and the prefixes the tensors use.
#include "fp4forge/model/shape_rules.h"

#include "fp4forge/model/structure.h"
#include "fp4forge/util/json_get.h"

namespace fp4forge {

bool ShapeContext::any_with_prefix(std::string_view prefix) const {
  auto it = tensors.lower_bound(prefix);
  return it != tensors.end() && std::string_view(it->first).substr(0, prefix.size()) == prefix;
}

std::optional<std::pair<std::int64_t, std::int64_t>> ShapeContext::linear_shape(const std::string& module) const {
  if (const auto* t = tensor(module + ".weight"); t != nullptr && t->shape.size() == 2)
    return std::make_pair(static_cast<std::int64_t>(t->shape[0]), static_cast<std::int64_t>(t->shape[1]));
  if (const auto* t = tensor(module + ".weight_packed"); t != nullptr && t->shape.size() == 2)
    return std::make_pair(static_cast<std::int64_t>(t->shape[0]), std::int64_t{-1});
  return std::nullopt;
}

std::optional<std::int64_t> ShapeContext::text_int(std::string_view key) const { return integral_of(text(), key); }

std::vector<std::string> ShapeContext::text_path(std::string_view key) const {
  if (info.wrapper) return {"text_config", std::string(key)};
  return {std::string(key)};
}

Status init_shape_context(ShapeContext& ctx) {
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
  return {};
}

}  // namespace fp4forge
