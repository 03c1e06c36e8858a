#pragma once
/**
 * The one did-you-mean of fp4forge (issue 55: typed names a list did not take got only the list): the candidate
 * nearest a typed word, for commands, schemes, observers, --arch names, --allow kinds and the like.
 */
#include <string>
#include <string_view>
#include <vector>

namespace fp4forge::util {

/** The candidate nearest `word` by edit distance with adjacent transpositions ("swpa" -> "swap" is one edit), letters
 * compared without case, at most a third of its length (at least 1) and not 0 (an exact match suggests nothing);
 * ties: the first. A candidate that differs from `word` only in case is nearest of all ("Q_proj" -> "q_proj"). ""
 * when none is that near. */
std::string nearest(std::string_view word, const std::vector<std::string>& candidates);

/** " (did you mean 'X'?)" for nearest(word, candidates), else "". */
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace fp4forge::util
