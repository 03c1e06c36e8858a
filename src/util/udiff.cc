#include "fp4forge/util/udiff.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

namespace fp4forge::util {
namespace {

enum class Op : unsigned char { EQUAL, DEL, INS };
struct Edit {
  Op op;
  std::size_t a;  // index into old lines (EQUAL, DEL)
  std::size_t b;  // index into new lines (EQUAL, INS)
};

// Splits into lines that keep their terminator ("\n"; a final line may lack one).
std::vector<std::string_view> split_lines(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start < s.size()) {
    const std::size_t nl = s.find('\n', start);
    if (nl == std::string_view::npos) {
      out.push_back(s.substr(start));
      break;
    }
    out.push_back(s.substr(start, nl - start + 1));
    start = nl + 1;
  }
  return out;
}

// Myers' O(ND) greedy algorithm with a per-step trace of the furthest-reaching paths, then a backtrack.
// Appends the edits for a[a0..a1) vs b[b0..b1). Returns false when the distance exceeds `limit`.
bool myers(const std::vector<std::string_view>& a, std::size_t a0, std::size_t a1,
           const std::vector<std::string_view>& b, std::size_t b0, std::size_t b1, std::size_t limit,
           std::vector<Edit>& out) {
  const long n = static_cast<long>(a1 - a0);
  const long m = static_cast<long>(b1 - b0);
  const long max = n + m;
  const long off = max + 1;
  std::vector<long> v(static_cast<std::size_t>(2 * max + 3), 0);
  std::vector<std::vector<long>> trace;  // trace[d][k + d] = v[k] before step d, k in [-d, d]
  long found_d = -1;
  for (long d = 0; d <= max; ++d) {
    if (static_cast<std::size_t>(d) > limit) return false;
    trace.emplace_back(v.begin() + (off - d), v.begin() + (off + d + 1));
    for (long k = -d; k <= d; k += 2) {
      long x = (k == -d || (k != d && v[off + k - 1] < v[off + k + 1])) ? v[off + k + 1] : v[off + k - 1] + 1;
      long y = x - k;
      while (x < n && y < m && a[a0 + x] == b[b0 + y]) {
        ++x;
        ++y;
      }
      v[off + k] = x;
      if (x >= n && y >= m) {
        found_d = d;
        break;
      }
    }
    if (found_d >= 0) break;
  }
  std::vector<Edit> rev;
  long x = n;
  long y = m;
  for (long d = found_d; d >= 0; --d) {
    const auto& tv = trace[static_cast<std::size_t>(d)];
    auto at = [&](long k) { return tv[static_cast<std::size_t>(k + d)]; };
    const long k = x - y;
    long prev_k = 0;
    if (d > 0) prev_k = (k == -d || (k != d && at(k - 1) < at(k + 1))) ? k + 1 : k - 1;
    const long prev_x = d > 0 ? at(prev_k) : 0;
    const long prev_y = prev_x - prev_k;
    while (x > prev_x && y > prev_y) {
      rev.push_back({Op::EQUAL, a0 + static_cast<std::size_t>(x - 1), b0 + static_cast<std::size_t>(y - 1)});
      --x;
      --y;
    }
    if (d > 0) {
      if (x == prev_x) {
        rev.push_back({Op::INS, a0 + static_cast<std::size_t>(x), b0 + static_cast<std::size_t>(prev_y)});
      } else {
        rev.push_back({Op::DEL, a0 + static_cast<std::size_t>(prev_x), b0 + static_cast<std::size_t>(y)});
      }
      x = prev_x;
      y = prev_y;
    }
  }
  out.insert(out.end(), rev.rbegin(), rev.rend());
  return true;
}

std::vector<Edit> edit_script(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b,
                              std::size_t limit) {
  std::vector<Edit> out;
  std::size_t pre = 0;
  while (pre < a.size() && pre < b.size() && a[pre] == b[pre]) ++pre;
  std::size_t suf = 0;
  while (suf < a.size() - pre && suf < b.size() - pre && a[a.size() - 1 - suf] == b[b.size() - 1 - suf]) ++suf;
  for (std::size_t i = 0; i < pre; ++i) out.push_back({Op::EQUAL, i, i});
  const std::size_t a1 = a.size() - suf;
  const std::size_t b1 = b.size() - suf;
  const std::size_t mark = out.size();
  if (!myers(a, pre, a1, b, pre, b1, limit, out)) {
    out.resize(mark);
    for (std::size_t i = pre; i < a1; ++i) out.push_back({Op::DEL, i, pre});
    for (std::size_t j = pre; j < b1; ++j) out.push_back({Op::INS, a1, j});
  }
  for (std::size_t i = 0; i < suf; ++i) out.push_back({Op::EQUAL, a1 + i, b1 + i});
  // Within each block of changes, list deletions before insertions (as diff -u does).
  for (std::size_t i = 0; i < out.size();) {
    if (out[i].op == Op::EQUAL) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < out.size() && out[j].op != Op::EQUAL) ++j;
    std::stable_partition(out.begin() + static_cast<long>(i), out.begin() + static_cast<long>(j),
                          [](const Edit& e) { return e.op == Op::DEL; });
    i = j;
  }
  return out;
}

void append_line(std::string& out, char tag, std::string_view line) {
  out += tag;
  out += line;
  if (line.empty() || line.back() != '\n') out += "\n\\ No newline at end of file\n";
}

std::string range(std::size_t start, std::size_t count) {
  // GNU convention: an empty range names the line before it; a count of 1 is omitted.
  if (count == 0) return fmt::format("{},0", start);
  if (count == 1) return fmt::format("{}", start + 1);
  return fmt::format("{},{}", start + 1, count);
}

}  // namespace

std::string unified_diff(std::string_view before, std::string_view after, std::string_view from_label,
                         std::string_view to_label, const UdiffOptions& opts) {
  if (before == after) return {};
  const auto a = split_lines(before);
  const auto b = split_lines(after);
  const auto edits = edit_script(a, b, opts.max_edit_distance);
  const std::size_t ctx = static_cast<std::size_t>(std::max(0, opts.context));

  std::string out = fmt::format("--- {}\n+++ {}\n", from_label, to_label);
  std::size_t i = 0;
  while (i < edits.size()) {
    if (edits[i].op == Op::EQUAL) {
      ++i;
      continue;
    }
    // A hunk: from ctx equal lines before the first change to ctx after the last change, merging
    // changes separated by at most 2*ctx equal lines.
    const std::size_t first = i >= ctx ? i - ctx : 0;
    std::size_t last_change = i;
    std::size_t j = i;
    while (j < edits.size()) {
      if (edits[j].op != Op::EQUAL) {
        last_change = j;
        ++j;
        continue;
      }
      std::size_t run = 0;
      while (j + run < edits.size() && edits[j + run].op == Op::EQUAL) ++run;
      if (j + run == edits.size() || run > 2 * ctx) break;
      j += run;
    }
    const std::size_t end = std::min(edits.size(), last_change + 1 + ctx);
    std::size_t a_count = 0;
    std::size_t b_count = 0;
    for (std::size_t k = first; k < end; ++k) {
      if (edits[k].op != Op::INS) ++a_count;
      if (edits[k].op != Op::DEL) ++b_count;
    }
    const std::size_t a_start = edits[first].a;
    const std::size_t b_start = edits[first].b;
    out += fmt::format("@@ -{} +{} @@\n", range(a_start, a_count), range(b_start, b_count));
    for (std::size_t k = first; k < end; ++k) {
      const Edit& e = edits[k];
      if (e.op == Op::EQUAL) append_line(out, ' ', a[e.a]);
      if (e.op == Op::DEL) append_line(out, '-', a[e.a]);
      if (e.op == Op::INS) append_line(out, '+', b[e.b]);
    }
    i = end;
  }
  return out;
}

DiffStat diff_stat(std::string_view before, std::string_view after, const UdiffOptions& opts) {
  DiffStat s;
  if (before == after) return s;
  const auto a = split_lines(before);
  const auto b = split_lines(after);
  for (const Edit& e : edit_script(a, b, opts.max_edit_distance)) {
    if (e.op == Op::DEL) ++s.removed;
    if (e.op == Op::INS) ++s.added;
  }
  return s;
}

}  // namespace fp4forge::util
