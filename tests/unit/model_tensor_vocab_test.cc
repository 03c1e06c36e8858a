// The tensor vocabulary (issue 54): the role table (tensor_role.h), the leaf table (tensor_param.h), the name
// split (tensor_names.h) and the source dtypes (core/dtype.h). Every role has its row, every leaf exactly one
// kind; the columns reproduce, member for member, the lists they replaced (written out here as the pin: a
// change to a column is a change of behaviour and must change this test with a reason).
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fp4forge/core/dtype.h"
#include "fp4forge/model/classify.h"
#include "fp4forge/model/tensor_names.h"
#include "fp4forge/model/tensor_param.h"
#include "fp4forge/model/tensor_role.h"

using namespace fp4forge;

namespace {

std::set<Role> roles_where(bool (*pred)(const RoleTraits&)) {
  std::set<Role> out;
  for (const RoleTraits& t : role_table())
    if (pred(t)) out.insert(t.role);
  return out;
}

std::set<std::string> leaves_where(bool (*pred)(const LeafTraits&)) {
  std::set<std::string> out;
  for (const LeafTraits& t : leaf_table())
    if (pred(t)) out.insert(std::string(t.leaf));
  return out;
}

TEST(RoleTable, EveryRoleHasOneRowInEnumOrderWithAUniqueSnakeCaseName) {
  ASSERT_EQ(role_table().size(), static_cast<std::size_t>(kRoleCount));
  std::set<std::string_view> names;
  for (int i = 0; i < kRoleCount; ++i) {
    const Role r = static_cast<Role>(i);
    const RoleTraits& t = role_traits(r);
    EXPECT_EQ(t.role, r) << i;
    EXPECT_EQ(role_name(r), t.name);
    EXPECT_FALSE(t.name.empty()) << i;
    EXPECT_TRUE(std::all_of(t.name.begin(), t.name.end(), [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; }))
        << t.name;
    EXPECT_TRUE(names.insert(t.name).second) << "duplicate role name " << t.name;
    EXPECT_FALSE(t.quantizable && t.is_protected) << t.name << " is both quantizable and protected";
    EXPECT_TRUE(!t.quantizable || t.linear) << t.name << ": only a Linear is quantized by default";
    EXPECT_TRUE(!t.expert_stack || t.group == RoleGroup::EXPERTS) << t.name;
    EXPECT_TRUE(!t.mla || t.group == RoleGroup::ATTENTION) << t.name;
  }
  EXPECT_EQ(role_name(static_cast<Role>(kRoleCount + 3)), "other");  // out of range: the OTHER row
  std::set<std::string_view> groups;
  for (int g = 0; g < kRoleGroupCount; ++g) EXPECT_TRUE(groups.insert(role_group_name(static_cast<RoleGroup>(g))).second);
}

// The columns equal the lists the table replaced (tensor_role.cc's two switches, recipe.cc's selectors,
// plan.cc's summary switch, verify's is_attention_or_mlp, shape_rules.cc's MLA cases).
TEST(RoleTable, ColumnsEqualTheListsTheyReplaced) {
  using R = Role;
  EXPECT_EQ(roles_where([](const RoleTraits& t) { return t.quantizable; }),
            (std::set<Role>{R::ATTN_Q, R::ATTN_K, R::ATTN_V, R::ATTN_O, R::ATTN_QKV, R::ATTN_Q_A, R::ATTN_Q_B,
                            R::ATTN_KV_A, R::ATTN_KV_B, R::MLP_GATE, R::MLP_UP, R::MLP_DOWN, R::MLP_GATE_UP,
                            R::EXPERT_GATE, R::EXPERT_UP, R::EXPERT_DOWN, R::EXPERT_GATE_UP_FUSED,
                            R::EXPERT_DOWN_FUSED, R::SHARED_EXPERT_GATE, R::SHARED_EXPERT_UP, R::SHARED_EXPERT_DOWN,
                            R::SHARED_EXPERT_GATE_UP}));
  EXPECT_EQ(roles_where([](const RoleTraits& t) { return t.is_protected; }),
            (std::set<Role>{R::ROUTER, R::ROUTER_AUX, R::ATTN_SINK, R::EXPERT_PROJ_BIAS, R::EMBEDDING, R::LM_HEAD,
                            R::NORM, R::LINEAR_ATTN, R::LINEAR_ATTN_CONV, R::LINEAR_ATTN_PARAM, R::MAMBA, R::VISION,
                            R::AUDIO, R::PROJECTOR, R::MTP, R::SCALAR}));
  auto linear_of = [](RoleGroup g) {
    std::set<Role> out;
    for (const RoleTraits& t : role_table())
      if (role_is_linear_of(t.role, g)) out.insert(t.role);
    return out;
  };
  EXPECT_EQ(linear_of(RoleGroup::ATTENTION), (std::set<Role>{R::ATTN_Q, R::ATTN_K, R::ATTN_V, R::ATTN_O, R::ATTN_QKV,
                                                             R::ATTN_Q_A, R::ATTN_Q_B, R::ATTN_KV_A, R::ATTN_KV_B}));
  EXPECT_EQ(linear_of(RoleGroup::DENSE_MLP), (std::set<Role>{R::MLP_GATE, R::MLP_UP, R::MLP_DOWN, R::MLP_GATE_UP}));
  EXPECT_EQ(linear_of(RoleGroup::EXPERTS), (std::set<Role>{R::EXPERT_GATE, R::EXPERT_UP, R::EXPERT_DOWN,
                                                           R::EXPERT_GATE_UP_FUSED, R::EXPERT_DOWN_FUSED}));
  EXPECT_EQ(linear_of(RoleGroup::SHARED_EXPERTS), (std::set<Role>{R::SHARED_EXPERT_GATE, R::SHARED_EXPERT_UP,
                                                                  R::SHARED_EXPERT_DOWN, R::SHARED_EXPERT_GATE_UP}));
  EXPECT_EQ(linear_of(RoleGroup::LINEAR_ATTENTION), (std::set<Role>{R::LINEAR_ATTN}));
  EXPECT_EQ(roles_where([](const RoleTraits& t) { return role_has_config_geometry(t.role); }),
            (std::set<Role>{R::ATTN_Q, R::ATTN_K, R::ATTN_V, R::ATTN_O, R::ATTN_QKV, R::ATTN_Q_A, R::ATTN_Q_B,
                            R::ATTN_KV_A, R::ATTN_KV_B, R::MLP_GATE, R::MLP_UP, R::MLP_DOWN, R::MLP_GATE_UP,
                            R::SHARED_EXPERT_GATE_UP, R::EXPERT_GATE, R::EXPERT_UP, R::EXPERT_DOWN,
                            R::SHARED_EXPERT_GATE, R::SHARED_EXPERT_UP, R::SHARED_EXPERT_DOWN}));
  EXPECT_EQ(roles_where([](const RoleTraits& t) { return t.mla; }),
            (std::set<Role>{R::ATTN_Q, R::ATTN_Q_A, R::ATTN_Q_B, R::ATTN_KV_A, R::ATTN_KV_B, R::ATTN_O}));
  // The selector names a recipe takes are the group names.
  EXPECT_EQ(role_group_name(RoleGroup::ATTENTION), "attention");
  EXPECT_EQ(role_group_name(RoleGroup::DENSE_MLP), "dense_mlp");
  EXPECT_EQ(role_group_name(RoleGroup::EXPERTS), "experts");
  EXPECT_EQ(role_group_name(RoleGroup::SHARED_EXPERTS), "shared_experts");
  EXPECT_EQ(role_group_name(RoleGroup::LINEAR_ATTENTION), "linear_attention");
}

TEST(LeafTable, EveryLeafMapsToExactlyOneKindAndEveryKindHasALeaf) {
  std::set<std::string_view> seen;
  std::set<ParamKind> kinds;
  for (const LeafTraits& t : leaf_table()) {
    EXPECT_TRUE(seen.insert(t.leaf).second) << "leaf '" << t.leaf << "' has two rows";
    EXPECT_NE(t.kind, ParamKind::OTHER) << t.leaf << ": a leaf in the table has a kind";
    EXPECT_EQ(param_kind(t.leaf), t.kind);
    EXPECT_EQ(leaf_traits(t.leaf), &t);
    kinds.insert(t.kind);
  }
  for (int k = 0; k < kParamKindCount - 1; ++k)
    EXPECT_TRUE(kinds.count(static_cast<ParamKind>(k))) << param_kind_name(static_cast<ParamKind>(k)) << " has no leaf";
  std::set<std::string_view> names;
  for (int k = 0; k < kParamKindCount; ++k) EXPECT_TRUE(names.insert(param_kind_name(static_cast<ParamKind>(k))).second);
  EXPECT_EQ(param_kind("gate_up_proj"), ParamKind::OTHER);
  EXPECT_EQ(leaf_traits("A_log"), nullptr);
}

// The columns equal the five lists they replaced: classify's kWeightParams and kQuantParams, verify's
// kSchemeParams + kExtraQuantParams and kKvScales, the FP8 reader's dropped leaves.
TEST(LeafTable, ColumnsEqualTheListsTheyReplaced) {
  using S = std::set<std::string>;
  EXPECT_EQ(leaves_where([](const LeafTraits& t) { return t.module_param; }),
            (S{"weight", "bias", "weight_packed", "weight_scale", "weight_global_scale", "input_global_scale",
               "weight_zero_point", "weight_shape", "weight_g_idx", "input_scale", "output_scale", "weight_scale_inv",
               "weight_scale_2"}));
  EXPECT_EQ(leaves_where([](const LeafTraits& t) { return t.quant_param; }),
            (S{"weight_packed", "weight_scale", "weight_global_scale", "input_global_scale", "weight_zero_point",
               "weight_shape", "weight_g_idx", "input_scale", "weight_scale_inv"}));
  EXPECT_EQ(leaves_where([](const LeafTraits& t) { return t.verify_member; }),
            (S{"weight_packed", "weight_scale", "weight_global_scale", "weight", "input_global_scale", "weight_shape",
               "weight_zero_point", "weight_g_idx", "input_scale", "weight_scale_inv", "weight_scale_2",
               "output_scale", "input_zero_point"}));
  EXPECT_EQ(leaves_where([](const LeafTraits& t) { return t.attention_scale; }),
            (S{"k_scale", "v_scale", "q_scale", "prob_scale"}));
  EXPECT_EQ(leaves_where([](const LeafTraits& t) { return t.fp8_dropped; }),
            (S{"input_scale", "k_scale", "v_scale", "q_scale", "kv_scale", "prob_scale", "output_scale",
               "input_zero_point", "weight_zero_point", "input_scale_ub", "output_zero_point"}));
  S metadata;
  for (const LeafTraits& t : leaf_table())
    if (is_quant_metadata(t.leaf)) metadata.insert(std::string(t.leaf));
  EXPECT_EQ(metadata, (S{"weight_scale", "weight_global_scale", "input_global_scale", "weight_zero_point", "weight_shape",
                         "weight_g_idx", "input_scale", "output_scale", "weight_scale_inv", "weight_scale_2"}));
  EXPECT_FALSE(is_quant_metadata("gate_up_proj"));
}

TEST(TensorNames, SplitLeafIsTheOneSplit) {
  EXPECT_EQ(names::split_leaf("model.layers.0.self_attn.q_proj.weight"),
            (std::pair<std::string_view, std::string_view>{"model.layers.0.self_attn.q_proj", "weight"}));
  EXPECT_EQ(names::split_leaf("lm_head"), (std::pair<std::string_view, std::string_view>{"", "lm_head"}));
  EXPECT_EQ(names::split_leaf("a."), (std::pair<std::string_view, std::string_view>{"a", ""}));
  EXPECT_EQ(names::split_leaf(".b"), (std::pair<std::string_view, std::string_view>{"", "b"}));
  EXPECT_EQ(names::module_of("x.y.z"), "x.y");
  EXPECT_EQ(names::leaf_of("x.y.z"), "z");
  EXPECT_EQ(names::leaf_of("z"), "z");
  EXPECT_EQ(names::module_of("z"), "");
}

TEST(TensorClassColumns, CarryModuleLeafKindAndGroup) {
  ModelInfo info;
  const TensorClass a = classify("model.layers.3.self_attn.q_proj.weight_global_scale", {}, info);
  EXPECT_EQ(a.module, "model.layers.3.self_attn.q_proj");
  EXPECT_EQ(a.param, "weight_global_scale");
  EXPECT_EQ(a.param_kind, ParamKind::GLOBAL_SCALE);
  EXPECT_EQ(a.role, Role::ATTN_Q);
  EXPECT_EQ(a.group, RoleGroup::ATTENTION);
  EXPECT_TRUE(a.quant_param);
  const TensorClass b = classify("model.layers.0.mlp.experts.gate_up_proj", std::vector<std::uint64_t>{4, 16, 8}, info);
  EXPECT_EQ(b.param_kind, ParamKind::OTHER);
  EXPECT_EQ(b.group, RoleGroup::EXPERTS);
  const TensorClass c = classify("model.layers.0.self_attn.k_scale", {}, info);
  EXPECT_EQ(c.role, Role::SCALAR);
  EXPECT_EQ(c.param_kind, ParamKind::KV_SCALE);
  EXPECT_FALSE(c.quant_param);
  const TensorClass d = classify("model.layers.0.self_attn.o_proj.weight_scale_2", {}, info);
  EXPECT_EQ(d.role, Role::ATTN_O);  // classified by its module
  EXPECT_FALSE(d.quant_param);      // but not flagged (the column's deliberate difference)
}

TEST(SourceDtype, BF16F16F32Only) {
  for (int i = 0; i < kDTypeCount; ++i) {
    const DType t = static_cast<DType>(i);
    EXPECT_EQ(is_source_dtype(t), t == DType::BF16 || t == DType::F16 || t == DType::F32) << dtype_name(t);
  }
}

}  // namespace
