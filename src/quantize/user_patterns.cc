// The user's module patterns in the planner (user_patterns.h).
#include "user_patterns.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "fp4forge/util/did_you_mean.h"
#include "fp4forge/util/format.h"

namespace fp4forge::quant {

int PatternSet::match(const std::vector<std::string>& names) {
  for (std::size_t i = 0; i < pats.size(); ++i)
    for (const auto& n : names)
      if (pats[i].matches(n)) {
        used[i] = true;
        return static_cast<int>(i);
      }
  return -1;
}

bool PatternSet::take(const std::vector<std::string>& names) {
  bool any = false;
  for (std::size_t i = 0; i < pats.size(); ++i)
    if (std::any_of(names.begin(), names.end(), [&](const std::string& n) { return pats[i].matches(n); }))
      any = used[i] = true;
  return any;
}

Status check_unused_patterns(const PatternSet& ps, const std::vector<TensorDecision>& decisions, bool tied_lm_head,
                             const std::function<bool(const NamePattern&)>& selects_candidate,
                             std::vector<std::string>& warnings) {
  const bool ignore = std::string_view(ps.flag) == "--ignore";
  std::vector<std::string> idle;  // re: patterns that match nothing: one warning for them all (R4-B19)
  for (std::size_t i = 0; i < ps.pats.size(); ++i) {
    const NamePattern& p = ps.pats[i];
    if (ps.used[i] || selects_candidate(p)) continue;
    if (p.is_regex()) {
      idle.push_back(fmt::format("'{}'", p.text()));
      continue;
    }
    // `--ignore lm_head` on a model whose lm_head is tied to embed_tokens (no lm_head tensor): the
    // user's intent (keep the head in 16 bits) already holds; a note, not an error.
    const std::string_view t = p.text();
    if (ignore && tied_lm_head && (t == "lm_head" || t.ends_with(".lm_head"))) {
      warnings.push_back(fmt::format("{} '{}': the model ties lm_head to embed_tokens (no lm_head tensor); "
                                     "nothing to ignore, the head stays unquantized",
                                     ps.flag, p.text()));
      continue;
    }
    const auto d = std::find_if(decisions.begin(), decisions.end(),
                                [&](const TensorDecision& x) { return x.name == t || x.cls.module == t; });
    if (d == decisions.end()) {
      // The nearest module name (a typo such as self_atn for self_attn), else none.
      std::vector<std::string> modules;
      for (const TensorDecision& x : decisions)
        if (x.linear_like && !x.cls.module.empty()) modules.push_back(x.cls.module);
      // A block (model.layers.0.mlp) holds modules: the pattern that names them all (issue 55 tryout: no hint).
      const std::string block = std::string(t) + ".";
      const auto inside = std::count_if(modules.begin(), modules.end(), [&](const std::string& m) {
        return m.starts_with(block);
      });
      // One routed expert (model.layers.0.mlp.experts.1): a layer's experts are kept all or none, so the regex over
      // its modules would be refused next (tryout Q-M1); the layer's experts container is what works.
      std::string container;
      bool all_experts = inside > 0;
      for (const TensorDecision& x : decisions) {
        if (!x.linear_like || !x.cls.module.starts_with(block)) continue;
        const std::string mark = fmt::format(".{}.", x.cls.expert);
        const std::size_t at = x.cls.expert >= 0 ? x.cls.module.rfind(mark) : std::string::npos;
        if (at == std::string::npos || (!container.empty() && container != x.cls.module.substr(0, at))) {
          all_experts = false;
          break;
        }
        container = x.cls.module.substr(0, at);
      }
      if (all_experts && !container.empty() && container.size() < t.size())
        return make_error(Errc::USAGE,
                          "{} '{}' names one routed expert of '{}': vLLM needs one scheme for all experts "
                          "of a layer (F10), so they are kept all or none; hint: {} {} keeps this layer's experts",
                          ps.flag, p.text(), container, ps.flag, container);
      if (inside > 0) {
        std::string escaped;
        for (char c : t) {
          if (c != '\0' && std::strchr(".[]()*+?^$|{}\\", c) != nullptr) escaped += '\\';
          escaped += c;
        }
        return make_error(Errc::USAGE, "{} '{}' names a block, not a module: it holds {} Linear module(s) ({}, ...); "
                          "hint: {} 're:^{}\\.' names them all", ps.flag, p.text(), inside,
                          *std::find_if(modules.begin(), modules.end(),
                                        [&](const std::string& m) { return m.starts_with(block); }),
                          ps.flag, escaped);
      }
      return make_error(Errc::USAGE,
                        "{} '{}' matches no module of the checkpoint{}; give a module name as on disk "
                        "(without '.weight') or re:REGEX",
                        ps.flag, p.text(), util::did_you_mean(t, modules));
    }
    // A Linear's weight tensor named instead of its module (q_proj.weight): ignore and force-quantize entries are
    // module names, as compressed-tensors and vLLM match them. It read "not a Linear weight; nothing to ignore"
    // and quantized the module (issue 55).
    if (d->linear_like && d->name == t && !d->cls.module.empty() && d->cls.module != t) {
      // Named twice, as its module and as its weight: the module's entry decided it.
      if (std::any_of(ps.pats.begin(), ps.pats.end(), [&](const NamePattern& o) { return o.matches(d->cls.module); }))
        continue;
      return make_error(Errc::USAGE, "{} '{}' names the weight tensor of module '{}'; {} takes module names, as "
                        "quantization_config's ignore list holds them; hint: {} {}",
                        ps.flag, p.text(), d->cls.module, ps.flag, ps.flag, d->cls.module);
    }
    if (!ignore)
      return make_error(Errc::USAGE, "{} '{}': '{}' (shape {}) is not a Linear weight; only Linear modules can be "
                        "quantized",
                        ps.flag, p.text(), d->name, format_shape(d->shape));
    warnings.push_back(fmt::format("{} '{}': '{}' (shape {}) is not a Linear weight; it is never quantized, so there "
                                   "is nothing to ignore",
                                   ps.flag, p.text(), d->name, format_shape(d->shape)));
  }
  if (idle.size() == 1) warnings.push_back(fmt::format("{} {} matches no module", ps.flag, idle[0]));
  if (idle.size() > 1)
    warnings.push_back(fmt::format("{} {} patterns match no module: {}", format_count(idle.size()), ps.flag,
                                   format_list(idle)));
  return {};
}

}  // namespace fp4forge::quant
