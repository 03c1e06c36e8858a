// The leaf table (tensor_param.h): one row per leaf name.
#include "fp4forge/model/tensor_param.h"

#include <array>

namespace fp4forge {
namespace {

using K = ParamKind;
constexpr bool Y = true, _ = false;

// clang-format off
//                                                               module quant verify fp8     attention
//                                                               param  param member dropped scale
constexpr std::array<LeafTraits, 21> kLeaves{{
    {"weight",              K::WEIGHT,             Y, _, Y, _, _},
    {"bias",                K::BIAS,               Y, _, _, _, _},
    {"weight_packed",       K::PAYLOAD,            Y, Y, Y, _, _},
    {"weight_scale",        K::SCALE,              Y, Y, Y, _, _},
    {"weight_global_scale", K::GLOBAL_SCALE,       Y, Y, Y, _, _},
    {"weight_scale_2",      K::GLOBAL_SCALE,       Y, _, Y, _, _},
    {"input_global_scale",  K::INPUT_GLOBAL_SCALE, Y, Y, Y, _, _},
    {"weight_zero_point",   K::ZERO_POINT,         Y, Y, Y, Y, _},
    {"weight_shape",        K::SHAPE,              Y, Y, Y, _, _},
    {"weight_g_idx",        K::G_IDX,              Y, Y, Y, _, _},
    {"weight_scale_inv",    K::SCALE_INV,          Y, Y, Y, _, _},
    {"input_scale",         K::INPUT_SCALE,        Y, Y, Y, Y, _},
    {"input_scale_ub",      K::INPUT_SCALE,        _, _, _, Y, _},
    {"input_zero_point",    K::INPUT_ZERO_POINT,   _, _, Y, Y, _},
    {"output_scale",        K::OUTPUT_SCALE,       Y, _, Y, Y, _},
    {"output_zero_point",   K::OUTPUT_ZERO_POINT,  _, _, _, Y, _},
    {"k_scale",             K::KV_SCALE,           _, _, _, Y, Y},
    {"v_scale",             K::KV_SCALE,           _, _, _, Y, Y},
    {"q_scale",             K::KV_SCALE,           _, _, _, Y, Y},
    {"prob_scale",          K::KV_SCALE,           _, _, _, Y, Y},
    {"kv_scale",            K::KV_SCALE,           _, _, _, Y, _},
}};

constexpr std::array<std::string_view, kParamKindCount> kKindNames{
    "weight", "bias", "payload", "scale", "global_scale", "input_global_scale", "zero_point", "shape", "g_idx",
    "scale_inv", "input_scale", "input_zero_point", "output_scale", "output_zero_point", "kv_scale", "other"};
// clang-format on

}  // namespace

std::span<const LeafTraits> leaf_table() noexcept { return kLeaves; }

const LeafTraits* leaf_traits(std::string_view leaf) noexcept {
  for (const LeafTraits& t : kLeaves)
    if (t.leaf == leaf) return &t;
  return nullptr;
}

ParamKind param_kind(std::string_view leaf) noexcept {
  const LeafTraits* t = leaf_traits(leaf);
  return t ? t->kind : ParamKind::OTHER;
}

std::string_view param_kind_name(ParamKind k) noexcept {
  const auto i = static_cast<std::size_t>(k);
  return i < kKindNames.size() ? kKindNames[i] : std::string_view("other");
}

bool is_quant_metadata(std::string_view leaf) noexcept {
  const LeafTraits* t = leaf_traits(leaf);
  return t && t->module_param && t->kind != ParamKind::WEIGHT && t->kind != ParamKind::BIAS &&
         t->kind != ParamKind::PAYLOAD;
}

}  // namespace fp4forge
