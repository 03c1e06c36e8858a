// tensor-dtype: a float parameter stored in an integer dtype, or in the other 16-bit float than config.json's dtype
// (tryout S-M1: an I16 norm weight passed doctor, quantize and verify and was copied into the output).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "checks.h"
#include "fp4forge/model/classify.h"

namespace fp4forge::doctor {
namespace {

bool is_integer_dtype(std::string_view d) {
  return d == "I8" || d == "I16" || d == "I32" || d == "I64" || d == "U8" || d == "U16" || d == "U32" || d == "U64" ||
         d == "BOOL";
}

// Roles whose weight and bias are float values in any checkpoint (a quantized one packs its Linears only).
bool always_float(Role r) { return r == Role::NORM || r == Role::EMBEDDING || r == Role::LM_HEAD; }

// Roles of the text stack's Linears: float in a checkpoint that is not quantized.
bool linear_role(RoleGroup g) {
  return g == RoleGroup::ATTENTION || g == RoleGroup::DENSE_MLP || g == RoleGroup::EXPERTS ||
         g == RoleGroup::SHARED_EXPERTS || g == RoleGroup::LINEAR_ATTENTION || g == RoleGroup::STATE_SPACE ||
         g == RoleGroup::ROUTING;
}

std::string examples(const std::vector<std::string>& names) {
  std::vector<std::string> first(names.begin(),
                                 names.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(names.size(), 3)));
  return fmt::format("'{}'{}", fmt::join(first, "', '"),
                     names.size() > 3 ? fmt::format(" and {} more", names.size() - 3) : std::string());
}

}  // namespace

void check_tensor_dtypes(const Context& ctx, FindingSink& out) {
  std::vector<std::string> integer, other_half;
  std::string integer_dtype;
  const std::string declared =
      !str_of(ctx.config, "dtype").empty() ? str_of(ctx.config, "dtype") : str_of(ctx.config, "torch_dtype");
  const std::string other = declared == "bfloat16" ? "F16" : declared == "float16" ? "BF16" : "";
  for (const auto& [name, meta] : ctx.tensors) {
    const TensorClass c = classify(name, meta.shape, ctx.info);
    if (c.param_kind != ParamKind::WEIGHT && c.param_kind != ParamKind::BIAS) continue;
    const bool float_param = always_float(c.role) || (!ctx.quantized && linear_role(c.group));
    if (!float_param) continue;
    if (is_integer_dtype(meta.dtype)) {
      integer.push_back(name);
      if (integer_dtype.empty()) integer_dtype = meta.dtype;
    } else if (!other.empty() && meta.dtype == other) {
      other_half.push_back(name);
    }
  }
  if (!integer.empty()) {
    FindingFields f;
    f.tensors = integer;
    f.expected = "a floating dtype (BF16, F16, F32)";
    f.actual = integer_dtype;
    f.message = fmt::format(
        "{} float parameter(s) stored in an integer dtype ({} first: {}): a loader casts the "
        "integers' values, not their bits, so the model computes with garbage",
        integer.size(), integer_dtype, examples(integer));
    f.hint = "a header edited or written wrong: take these tensors from the release";
    out.add(finding_kind("tensor-dtype"), std::move(f));
  }
  if (!other_half.empty()) {
    FindingFields f;
    f.severity = Severity::WARNING;
    f.tensors = other_half;
    f.key = "dtype";
    f.expected = declared;
    f.actual = other;
    f.message = fmt::format(
        "{} tensor(s) stored as {} in a {} checkpoint ({}): vLLM casts them to {} on load, right "
        "only if their bytes are {} values; a header relabelled without its data reads as garbage",
        other_half.size(), other, declared, examples(other_half), declared, other);
    f.hint = "compare them with the release (fp4forge diff DIR RELEASE --values)";
    out.add(finding_kind("tensor-dtype"), std::move(f));
  }
}

}  // namespace fp4forge::doctor
