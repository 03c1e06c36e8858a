#include "fp4forge/core/finding_sink.h"

#include <fmt/format.h>

#include <algorithm>

namespace fp4forge {

namespace {

/** One finding of `kind` from `fields`, as it stands (no merge, no cap). */
Finding make_finding(const FindingKind& kind, FindingFields fields) {
  Finding f;
  f.kind = std::string(kind.id);
  f.severity = fields.severity.value_or(kind.severity);
  f.message = std::move(fields.message);
  f.tensors = std::move(fields.tensors);
  f.key = std::move(fields.key);
  f.expected = std::move(fields.expected);
  f.actual = std::move(fields.actual);
  f.hint = std::move(fields.hint);
  f.fix = std::move(fields.fix);
  return f;
}

}  // namespace

void FindingSink::add(const FindingKind& kind, FindingFields fields) {
  std::string group = std::move(fields.group);
  Finding f = make_finding(kind, std::move(fields));
  if (!group.empty()) {
    const std::string k = f.kind + '\x1f' + std::string(severity_name(f.severity)) + '\x1f' + group;
    const auto [it, fresh] = index_.try_emplace(k, items_.size());
    if (!fresh) {
      Item& item = items_[it->second];
      ++item.count;
      for (auto& t : f.tensors) item.finding.tensors.push_back(std::move(t));
      return;
    }
  }
  items_.push_back({std::move(f), std::move(group), 1});
}

void FindingSink::add(Finding finding) { items_.push_back({std::move(finding), {}, 1}); }

std::vector<Finding> FindingSink::take() {
  std::vector<Finding> out;
  out.reserve(items_.size());
  for (auto& [f, group, count] : items_) {
    if (count > 1) f.message += fmt::format(" (and {} more like it in {})", count - 1, group);
    auto& ts = f.tensors;
    std::sort(ts.begin(), ts.end());
    ts.erase(std::unique(ts.begin(), ts.end()), ts.end());
    if (ts.size() > max_listed_) {
      f.message += fmt::format(" [{} tensors, first {} listed]", ts.size(), max_listed_);
      ts.resize(max_listed_);
    }
    out.push_back(std::move(f));
  }
  items_.clear();
  index_.clear();
  std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    return static_cast<int>(a.severity) < static_cast<int>(b.severity);
  });
  return out;
}

}  // namespace fp4forge
