#include "fp4forge/util/did_you_mean.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace fp4forge::util {

std::string nearest(std::string_view word, const std::vector<std::string>& candidates) {
  const std::size_t limit = std::max<std::size_t>(1, word.size() / 3);
  std::size_t best = limit + 1;
  std::string pick;
  // Letters compared without case (issue 55 tryout: `Q_proj` was offered `k_proj`, one substitution away either
  // way): a candidate only the case tells apart is the nearest of all.
  const auto same = [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  };
  for (const std::string& c : candidates)
    if (c.size() == word.size() && c != word && std::equal(c.begin(), c.end(), word.begin(), same)) return c;
  for (const std::string& c : candidates) {
    if (c.size() > word.size() + limit || word.size() > c.size() + limit) continue;
    // Optimal string alignment: insertions, deletions, substitutions and adjacent transpositions.
    std::vector<std::vector<std::size_t>> d(word.size() + 1, std::vector<std::size_t>(c.size() + 1));
    for (std::size_t i = 0; i <= word.size(); ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= c.size(); ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= word.size(); ++i)
      for (std::size_t j = 1; j <= c.size(); ++j) {
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (same(word[i - 1], c[j - 1]) ? 0 : 1)});
        if (i > 1 && j > 1 && same(word[i - 1], c[j - 2]) && same(word[i - 2], c[j - 1]))
          d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    const std::size_t dist = d[word.size()][c.size()];
    if (dist < best && dist > 0) {
      best = dist;
      pick = c;
    }
  }
  return pick;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string pick = nearest(word, candidates);
  return pick.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", pick);
}

}  // namespace fp4forge::util
