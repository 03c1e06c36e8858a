// Layer stacks read from tensor names (include/fp4forge/model/structure.h).
#include "fp4forge/model/structure.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/model/tensor_names.h"

namespace fp4forge {
namespace {

constexpr std::size_t kMaxDepth = 6;  // a layer container deeper than this is not a decoder stack

using names::parse_index;

bool is_container(std::string_view c) { return names::one_of(c, names::kLayerContainers) || c == "resblocks"; }

bool tower_named(std::string_view root) {
  std::size_t start = 0;
  while (start < root.size()) {
    const std::size_t dot = root.find('.', start);
    const std::string_view c = root.substr(start, (dot == std::string_view::npos ? root.size() : dot) - start);
    if (names::is_vision_component(c) || names::is_audio_component(c) || names::is_projector_component(c) ||
        c == "mtp" || c == "encoder" || c == "decoder_block")
      return true;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return false;
}

}  // namespace

StackLayout read_structure(std::span<const NamedShape> tensors, const ModelInfo& info) {
  std::map<std::pair<std::string, std::string>, LayerStack> by;
  const std::uint64_t H = info.hidden_size > 0 ? static_cast<std::uint64_t>(info.hidden_size) : 0;
  for (const auto& t : tensors) {
    std::string_view comp[kMaxDepth + 1];
    std::size_t n = 0, start = 0;
    const std::string_view name = t.name;
    while (n <= kMaxDepth && start <= name.size()) {
      const std::size_t dot = name.find('.', start);
      if (dot == std::string_view::npos) break;  // the last component is a parameter, never a container
      comp[n++] = name.substr(start, dot - start);
      start = dot + 1;
    }
    for (std::size_t i = 0; i + 1 < n && i < kMaxDepth; ++i) {
      if (!is_container(comp[i])) continue;
      const int idx = parse_index(comp[i + 1]);
      if (idx < 0) continue;
      const std::size_t root_len = static_cast<std::size_t>(comp[i].data() - name.data());
      LayerStack& st = by[{std::string(name.substr(0, root_len)), std::string(comp[i])}];
      st.tensors++;
      st.layers = std::max<std::int64_t>(st.layers, idx + 1);
      if (t.shape.size() == 2) {
        st.matrices++;
        if (H != 0 && (t.shape[0] == H || t.shape[1] == H)) st.hidden_matches++;
      }
      break;
    }
  }
  StackLayout s;
  for (auto& [key, st] : by) {
    st.root = key.first;
    st.container = key.second;
    st.tower_named = tower_named(st.root);
    s.stacks.push_back(st);
  }
  // The text decoder: not tower-named, hidden_size on a side of its matrices (when the config states it),
  // then the most tensors, then the shortest root.
  auto score = [&](const LayerStack& st) {
    return std::make_tuple(st.hidden_matches > 0 || H == 0, st.tensors, -static_cast<std::int64_t>(st.root.size()));
  };
  for (std::size_t i = 0; i < s.stacks.size(); ++i) {
    if (s.stacks[i].tower_named) continue;
    if (s.text < 0 || score(s.stacks[i]) > score(s.stacks[static_cast<std::size_t>(s.text)])) s.text = static_cast<int>(i);
  }
  // Towers: for every other stack, its shortest root prefix that is not a prefix of the text root.
  const std::string text_root = s.text >= 0 ? s.stacks[static_cast<std::size_t>(s.text)].root : std::string();
  for (std::size_t i = 0; i < s.stacks.size(); ++i) {
    if (static_cast<int>(i) == s.text) continue;
    const std::string& r = s.stacks[i].root;
    std::size_t cut = 0;
    while (true) {
      const std::size_t dot = r.find('.', cut);
      if (dot == std::string::npos) break;
      cut = dot + 1;
      if (text_root.compare(0, cut, r, 0, cut) != 0) break;
    }
    if (cut == 0) continue;  // a top-level stack beside the text stack: nothing to name it by
    const std::string tr = r.substr(0, cut);
    if (text_root.compare(0, tr.size(), tr) == 0) continue;  // a prefix of the text root (same stack family)
    if (std::find(s.tower_roots.begin(), s.tower_roots.end(), tr) == s.tower_roots.end()) s.tower_roots.push_back(tr);
  }
  return s;
}

void apply_structure(ModelInfo& info, const StackLayout& s) {
  info.structure_read = true;
  info.tower_roots = s.tower_roots;
  if (s.text >= 0) {
    const LayerStack& t = s.stacks[static_cast<std::size_t>(s.text)];
    info.text_root = t.root;
    info.text_container = t.container;
    // The prefix the tensors use, not the family's preferred one: DeepSeek-V4's release names (`layers.L.*`) have
    // none, GPT-2's is `transformer.` (inspect reports it; the shape rules and the MTP splice build names from it).
    info.text_prefix = t.root;
    // A family outside the registry: decoder layers past num_hidden_layers, with an MTP count declared
    // (num_nextn_predict_layers), are multi-token-prediction layers stored DeepSeek-style (kept out of the
    // text stack as the registry's EXTRA_LAYERS families are), not text layers the config forgot.
    if (info.family == Family::UNKNOWN && info.mtp_form == MtpForm::NONE && info.mtp_num_hidden_layers > 0 &&
        info.num_layers > 0 && info.stack_layers == 0 && t.layers > info.num_layers &&
        t.layers <= info.num_layers + info.mtp_num_hidden_layers)
      info.mtp_form = MtpForm::EXTRA_LAYERS;
  }
}

void read_structure_into(ModelInfo& info, std::span<const NamedShape> tensors) {
  apply_structure(info, read_structure(tensors, info));
}

Result<ModelInfo> read_checkpoint_info(const Checkpoint& ckpt) {
  FP4FORGE_ASSIGN_OR_RETURN(ModelInfo info, read_model_info(ckpt.config()));
  read_structure_into(info, named_shapes(ckpt));
  return info;
}

}  // namespace fp4forge
