#pragma once
// The one lookup of a codec path by name, for every scheme's kernels (NVFP4's `Kernels` records, the other
// schemes' `scheme_fast::PathKernel`): "scalar" is the reference (each caller returns its own), any other name a
// Highway target this CPU supports, best first; one USAGE wording for a name that is neither.
#include <string>
#include <string_view>
#include <vector>

#include "fp4forge/core/error.h"

namespace fp4forge::codec_paths {

/** The supported target named `path` among `simd` (records with a `name`); USAGE listing every path. */
template <class K>
Result<const K*> find_simd(const std::vector<K>& simd, std::string_view path) {
  std::string names = "scalar";
  for (const K& k : simd) {
    if (k.name == path) return &k;
    names += ", " + k.name;
  }
  return make_error(Errc::USAGE, "codec path '{}' is not available on this CPU/build; expected one of: {}", path,
                    names);
}

/** "scalar", then the supported targets, best first. */
template <class K>
std::vector<std::string> names(const std::vector<K>& simd) {
  std::vector<std::string> out{"scalar"};
  for (const K& k : simd) out.push_back(k.name);
  return out;
}

/** The best supported target, or "scalar" when none is. */
template <class K>
std::string best(const std::vector<K>& simd) {
  return simd.empty() ? std::string("scalar") : simd.front().name;
}

}  // namespace fp4forge::codec_paths
