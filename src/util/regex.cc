// RE2-backed patterns (include/fp4forge/util/regex.h).
#include "fp4forge/util/regex.h"

#include <re2/re2.h>

namespace fp4forge {
namespace {

/** Python-only spellings RE2 writes differently: `\Z` (end of string) is RE2's `\z`. */
std::string to_re2(std::string_view p) {
  std::string out;
  out.reserve(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '\\' && i + 1 < p.size()) {
      out += '\\';
      out += p[i + 1] == 'Z' ? 'z' : p[i + 1];
      ++i;
      continue;
    }
    out += p[i];
  }
  return out;
}

}  // namespace

Result<Regex> Regex::compile(std::string_view pattern) {
  RE2::Options o;
  o.set_log_errors(false);
  o.set_max_mem(64 << 20);
  auto re = std::make_shared<const RE2>(to_re2(pattern), o);
  if (!re->ok())
    return make_error(Errc::BAD_INPUT, "{} (the linear-time engine takes Python re syntax without "
                      "backreferences or lookaround)", re->error());
  Regex r;
  r.re_ = std::move(re);
  r.pattern_ = std::string(pattern);
  return r;
}

bool Regex::match_prefix(std::string_view s) const {
  return re_->Match(re2::StringPiece(s.data(), s.size()), 0, s.size(), RE2::ANCHOR_START, nullptr, 0);
}

bool Regex::full_match(std::string_view s) const {
  return re_->Match(re2::StringPiece(s.data(), s.size()), 0, s.size(), RE2::ANCHOR_BOTH, nullptr, 0);
}

std::vector<Regex::Match> Regex::find_all(std::string_view s) const {
  const int ng = re_->NumberOfCapturingGroups() + 1;
  std::vector<re2::StringPiece> g(static_cast<std::size_t>(ng));
  std::vector<Match> out;
  const re2::StringPiece text(s.data(), s.size());
  std::size_t pos = 0;
  while (pos <= s.size() && re_->Match(text, pos, s.size(), RE2::UNANCHORED, g.data(), ng)) {
    Match m;
    m.begin.assign(static_cast<std::size_t>(ng), std::string::npos);
    m.end.assign(static_cast<std::size_t>(ng), std::string::npos);
    for (std::size_t k = 0; k < g.size(); ++k) {
      if (g[k].data() == nullptr) continue;
      m.begin[k] = static_cast<std::size_t>(g[k].data() - s.data());
      m.end[k] = m.begin[k] + g[k].size();
    }
    const std::size_t b0 = static_cast<std::size_t>(g[0].data() - s.data()), e0 = b0 + g[0].size();
    pos = e0 == b0 ? e0 + 1 : e0;
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace fp4forge
