#include "fp4forge/core/finding_kinds.h"

namespace fp4forge {

std::span<const FindingKind> finding_kinds() noexcept { return kFindingKinds; }

const FindingKind* find_finding_kind(std::string_view id) noexcept {
  for (const auto& k : kFindingKinds)
    if (k.id == id) return &k;
  return nullptr;
}

}  // namespace fp4forge
