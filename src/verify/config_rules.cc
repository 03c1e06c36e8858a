// verify's share of doctor's config-vs-tensor shape rules (model/shape_rules.h): what its own geometry check does
// not look at (the embedding and lm_head against vocab_size, norms, conv and state tensors, expert layouts), so a
// folder doctor finds broken is never OK here (issue 55 tryout J: a vocab_size the tensors do not have passed).
#include <algorithm>
#include <limits>
#include <string_view>

#include "fp4forge/model/shape_rules.h"
#include "verify/internal.h"

namespace fp4forge::verify_internal {

namespace {

/** A rule's tensor names a module check_geometry reported: the module itself or its `.weight`. */
bool covered(const std::set<std::string>& flagged, const std::string& tensor) {
  if (flagged.count(tensor)) return true;
  constexpr std::string_view kWeight = ".weight";
  return tensor.ends_with(kWeight) && flagged.count(tensor.substr(0, tensor.size() - kWeight.size())) > 0;
}

}  // namespace

void check_config_rules(const Checkpoint& q, const Structure& s, FindingSink& sink) {
  if (!q.has_config() || q.tensors().empty()) return;
  ShapeContext ctx;
  ctx.dir = q.dir();
  ctx.ckpt = &q;
  ctx.config = q.config();
  ctx.tensors = tensor_metas(q);
  // A config the rules cannot read is reported by the checks that read it first (quant config, geometry).
  if (!init_shape_context(ctx).ok()) return;
  FindingSink rules(std::numeric_limits<std::size_t>::max());  // every tensor listed: coverage is decided on all
  check_config_shapes(ctx, rules);
  const FindingKind& mismatch = finding_kind("config-shape-mismatch");
  const FindingKind& layout = finding_kind("expert-layout");
  for (Finding& f : rules.take()) {
    if (!is_kind(f, mismatch) && !is_kind(f, layout)) continue;
    const bool all_reported =
        !f.tensors.empty() && std::all_of(f.tensors.begin(), f.tensors.end(),
                                          [&](const std::string& t) { return covered(s.shape_flagged, t); });
    if (all_reported) continue;
    sink.add(std::move(f));
  }
}

}  // namespace fp4forge::verify_internal

namespace fp4forge {

std::vector<Finding> drop_shape_duplicates(std::vector<Finding> fs) {
  std::set<std::string> modules;  // the modules geometry-mismatch names, by their weight_packed or weight
  for (const Finding& f : fs)
    if (is_kind(f, finding_kind("geometry-mismatch")))
      for (const std::string& t : f.tensors)
        for (std::string_view leaf : {".weight_packed", ".weight"})
          if (t.ends_with(leaf)) modules.insert(t.substr(0, t.size() - leaf.size()));
  if (modules.empty()) return fs;
  std::erase_if(fs, [&](const Finding& f) {
    return is_kind(f, finding_kind("config-shape-mismatch")) && !f.tensors.empty() &&
           std::all_of(f.tensors.begin(), f.tensors.end(),
                       [&](const std::string& t) { return verify_internal::covered(modules, t); });
  });
  return fs;
}

}  // namespace fp4forge
