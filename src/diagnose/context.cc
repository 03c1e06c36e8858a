#include "checks.h"
#include "fp4forge/model/quant_config.h"
#include "fp4forge/model/structure.h"
#include "fp4forge/util/fs.h"

namespace fp4forge::doctor {

Status init_context(Context& ctx) {
  FP4FORGE_TRY(init_shape_context(ctx));
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
  ctx.tensors = tensor_metas(ckpt);
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

bool same_json(const Json& a, const Json& b) {
  return nlohmann::json::parse(a.dump()) == nlohmann::json::parse(b.dump());
}

void run_checks(const Context& ctx, FindingSink& out) {
  check_architecture(ctx, out);
  check_gemma4_globals(ctx, out);
  check_config_shapes(ctx, out);
  check_config_values(ctx, out);
  check_tensor_dtypes(ctx, out);
  check_modalities(ctx, out);
  check_mtp(ctx, out);
  check_processor(ctx, out);
  check_tokenizer(ctx, out);
  check_quantized(ctx, out);
  check_fp8_claims(ctx, out);
}

}  // namespace fp4forge::doctor
