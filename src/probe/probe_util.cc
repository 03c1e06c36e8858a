// Small pure helpers of the probe: check names, masking, URL normalisation, n-gram repetition.
#include <algorithm>
#include <cctype>
#include <string>
#include <unordered_set>

#include <fmt/format.h>

#include "fp4forge/probe/probe.h"
#include "fp4forge/util/did_you_mean.h"
#include "fp4forge/util/redact.h"
#include "fp4forge/util/strings.h"

namespace fp4forge::probe {

const char* check_name(Check c) noexcept {
  switch (c) {
    case Check::MODELS: return "models";
    case Check::PROSE: return "prose";
    case Check::LONG: return "long";
    case Check::LOGPROBS: return "logprobs";
    case Check::VISION: return "vision";
    case Check::TOOLS: return "tools";
    case Check::MULTITURN: return "multiturn";
    case Check::COMPLETIONS: return "completions";
    case Check::REASONING: return "reasoning";
    case Check::CONTEXT: return "context";
    case Check::KV: return "kv";
  }
  return "?";
}

const char* status_name(CheckStatus s) noexcept {
  switch (s) {
    case CheckStatus::PASS: return "pass";
    case CheckStatus::FAIL: return "fail";
    case CheckStatus::SKIP: return "skip";
  }
  return "?";
}

std::vector<Check> all_checks() {
  return {Check::MODELS, Check::PROSE,      Check::LONG,        Check::LOGPROBS,  Check::VISION, Check::TOOLS,
          Check::MULTITURN, Check::COMPLETIONS, Check::REASONING, Check::CONTEXT, Check::KV};
}

Result<std::vector<Check>> parse_checks(std::string_view list) {
  std::vector<Check> picked;
  std::string valid;
  for (Check c : all_checks()) valid += std::string(valid.empty() ? "" : ",") + check_name(c);
  std::size_t pos = 0;
  bool any = false;
  while (pos <= list.size()) {
    std::size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view item = list.substr(pos, comma - pos);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) item.remove_prefix(1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.remove_suffix(1);
    pos = comma + 1;
    if (item.empty()) continue;
    any = true;
    if (item == "all") {
      picked = all_checks();
      continue;
    }
    bool found = false;
    for (Check c : all_checks()) {
      if (item == check_name(c)) {
        if (std::find(picked.begin(), picked.end(), c) == picked.end()) picked.push_back(c);
        found = true;
      }
    }
    if (!found) {
      std::vector<std::string> names{"all"};
      for (Check c : all_checks()) names.emplace_back(check_name(c));
      return make_error(Errc::USAGE, "--checks: unknown check '{}'{}, expected a comma-separated subset of {} (or all)",
                        item, util::did_you_mean(item, names), valid);
    }
  }
  if (!any) return make_error(Errc::USAGE, "--checks: empty list, expected a subset of {} (or all)", valid);
  // Run in the canonical order whatever the order given.
  std::vector<Check> ordered;
  for (Check c : all_checks())
    if (std::find(picked.begin(), picked.end(), c) != picked.end()) ordered.push_back(c);
  return ordered;
}

bool ProbeReport::all_passed() const {
  return std::all_of(checks.begin(), checks.end(), [](const CheckResult& c) { return c.status == CheckStatus::PASS; });
}

std::string ProbeReport::not_proven() const {
  if (unreachable || any_failed() || checks.empty()) return {};
  for (const CheckResult& c : checks)
    if (c.status == CheckStatus::SKIP && c.kv && c.kv->expected_tokens > 0)
      return fmt::format("the expected KV pool of {} tokens was not compared: {}", c.kv->expected_tokens,
                         c.classification);
  if (std::none_of(checks.begin(), checks.end(), [](const CheckResult& c) { return c.status == CheckStatus::PASS; }))
    return "no check passed: every one was skipped";
  return {};
}

bool ProbeReport::any_failed() const {
  return std::any_of(checks.begin(), checks.end(), [](const CheckResult& c) { return c.status == CheckStatus::FAIL; });
}

namespace {
// Whitespace and control bytes a server may put inside an echoed key (a line break in a wrapped message).
bool is_gap(char c) { return static_cast<unsigned char>(c) < 0x20 || c == ' ' || c == 0x7F; }
}  // namespace

std::string mask_secret(std::string_view text, std::string_view secret) {
  std::string out(text);
  if (secret.empty()) return out;
  // A short key (under 8 bytes: `x`, `test`) is masked where it stands as a word of its own, not inside other
  // words (issue 55 tryout E-3: `--api-key e` turned "model" into "mod***l"); a long key is masked wherever
  // it occurs.
  const bool short_key = secret.size() < 8;
  const auto word_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
  };
  const auto stands_alone = [&](std::size_t b, std::size_t e) {
    return !short_key || ((b == 0 || !word_char(out[b - 1])) && (e >= out.size() || !word_char(out[e])));
  };
  std::size_t pos = 0;
  while ((pos = out.find(secret, pos)) != std::string::npos) {
    if (!stands_alone(pos, pos + secret.size())) {
      ++pos;
      continue;
    }
    out.replace(pos, secret.size(), "***");
    pos += 3;
  }
  // Issue 27 #15: the key echoed with line breaks or other gaps inside it ("sk-abc\ndef") is masked whole: each
  // start where the key's first byte sits is matched byte by byte, skipping gaps in the text (not in the key).
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] != secret[0]) continue;
    std::size_t j = i, k = 0, gaps = 0;
    while (j < out.size() && k < secret.size()) {
      if (out[j] == secret[k]) {
        ++j;
        ++k;
      } else if (k > 0 && is_gap(out[j]) && !is_gap(secret[k])) {
        ++j;
        ++gaps;
      } else {
        break;
      }
    }
    if (k == secret.size() && gaps > 0 && stands_alone(i, j)) out.replace(i, j - i, "***");
  }
  // A key cut by a length limit before it was masked: a leading part of the key (4 bytes or more) right
  // before a cut ("..." or the end of the text) is masked too.
  for (const std::string_view cut : {std::string_view("..."), std::string_view()}) {
    if (!cut.empty() && (out.size() < cut.size() || out.compare(out.size() - cut.size(), cut.size(), cut) != 0)) continue;
    const std::size_t end = out.size() - cut.size();
    for (std::size_t k = std::min(secret.size() - 1, end); k >= 4; --k)
      if (out.compare(end - k, k, secret.substr(0, k)) == 0 && stands_alone(end - k, out.size())) {
        out.replace(end - k, k, "***");
        return out;
      }
  }
  return out;
}

nlohmann::json parse_server_json(std::string_view text, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > max_depth) return nlohmann::json(nlohmann::json::value_t::discarded);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  // A NUL byte would end nlohmann's input early ("{...}\0garbage" parses); JSON never holds one.
  if (text.find('\0') != std::string::npos) return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text, nullptr, false);
}

namespace {
/** [begin, end) of the password in `scheme://user:password@host...`, or {npos, npos}. */
std::pair<std::size_t, std::size_t> password_span(std::string_view url) {
  const std::size_t s = url.find("://");
  if (s == std::string_view::npos) return {std::string_view::npos, std::string_view::npos};
  const std::size_t host_end = url.find_first_of("/?#", s + 3);
  const std::string_view auth = url.substr(s + 3, host_end == std::string_view::npos ? std::string_view::npos : host_end - s - 3);
  const std::size_t at = auth.rfind('@');
  if (at == std::string_view::npos) return {std::string_view::npos, std::string_view::npos};
  const std::size_t colon = auth.substr(0, at).find(':');
  if (colon == std::string_view::npos) return {std::string_view::npos, std::string_view::npos};
  return {s + 3 + colon + 1, s + 3 + at};
}
}  // namespace

std::string url_password(std::string_view url) {
  const auto [b, e] = password_span(url);
  return b == std::string_view::npos ? std::string() : std::string(url.substr(b, e - b));
}

Status check_base_url(std::string_view url) {
  const std::size_t s = url.find("://");
  std::string scheme(url.substr(0, s == std::string_view::npos ? 0 : s));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == std::string_view::npos || (scheme != "http" && scheme != "https"))
    return make_error(Errc::USAGE, "'{}' is not an http:// or https:// URL; the probe talks HTTP only; hint: "
                      "http://HOST:PORT (a trailing /v1 is fine)",
                      util::redact_url(url.substr(0, std::min<std::size_t>(url.size(), 200))));
  // What a client would otherwise send or print raw (R4-B18, round-3 B14): a space, a control byte (a CR/LF
  // forges a header line), a raw non-ASCII byte (an IDN host curl resolves as its own bytes).
  const auto shown = [&] { return util::printable(util::redact_url(url), 200); };
  for (std::size_t i = 0; i < url.size(); ++i) {
    const auto c = static_cast<unsigned char>(url[i]);
    if (c > 0x20 && c < 0x7f) continue;
    return make_error(Errc::USAGE, "'{}' holds {} at byte {}; expected a URL of printable ASCII; hint: {}", shown(),
                      c == ' ' ? "a space" : c >= 0x80 ? "a non-ASCII byte" : fmt::format("control byte 0x{:02x}", c), i,
                      c >= 0x80 ? "write an international host name in its ASCII form (xn--...) and percent-encode "
                                  "the rest"
                                : "percent-encode it (%20 for a space)");
  }
  const std::string_view rest = url.substr(s + 3);
  std::string_view auth = rest.substr(0, rest.find_first_of("/?#"));
  if (const std::size_t at = auth.rfind('@'); at != std::string_view::npos) auth = auth.substr(at + 1);
  std::string_view port;
  std::string_view host = auth;
  if (!auth.empty() && auth.front() == '[') {  // an IPv6 literal
    const std::size_t close = auth.find(']');
    host = auth.substr(0, close == std::string_view::npos ? auth.size() : close + 1);
    if (close == std::string_view::npos || (close + 1 < auth.size() && auth[close + 1] != ':'))
      return make_error(Errc::USAGE, "'{}': the IPv6 host is not '[ADDRESS]' or '[ADDRESS]:PORT'; hint: "
                        "http://[::1]:8000", shown());
    if (close + 1 < auth.size()) port = auth.substr(close + 2);
  } else if (const std::size_t colon = auth.find(':'); colon != std::string_view::npos) {
    host = auth.substr(0, colon);
    port = auth.substr(colon + 1);
    if (port.empty())
      return make_error(Errc::USAGE, "'{}' has a ':' without a port; expected HOST:PORT with PORT 1-65535; hint: "
                        "http://HOST:8000", shown());
  }
  if (host.empty()) return make_error(Errc::USAGE, "'{}' has no host; hint: http://HOST:PORT", shown());
  if (!port.empty() && (port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos ||
                        std::stoul(std::string(port)) == 0 || std::stoul(std::string(port)) > 65535))
    return make_error(Errc::USAGE, "'{}': port '{}' is not a TCP port; expected 1-65535; hint: http://HOST:8000",
                      shown(), util::printable(port, 40));
  return {};
}

std::string normalize_base_url(std::string_view url) {
  std::string u(url);
  while (!u.empty() && u.back() == '/') u.pop_back();
  if (u.size() >= 3 && u.compare(u.size() - 3, 3, "/v1") == 0) u.resize(u.size() - 3);
  while (!u.empty() && u.back() == '/') u.pop_back();
  return u;
}

double repeated_ngram_ratio(std::string_view text, int n) {
  if (n < 1) n = 1;
  std::vector<std::string> words;
  std::string cur;
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isspace(c)) {
      if (!cur.empty()) words.push_back(std::move(cur));
      cur.clear();
    } else if (!std::ispunct(c)) {
      cur += static_cast<char>(std::tolower(c));
    }
  }
  if (!cur.empty()) words.push_back(std::move(cur));
  const auto un = static_cast<std::size_t>(n);
  std::unordered_set<std::string> seen;
  std::size_t total = 0;
  if (words.size() >= 4 * un) {
    for (std::size_t i = 0; i + un <= words.size(); ++i) {
      std::string g;
      for (std::size_t k = 0; k < un; ++k) g += words[i + k] + '\x1f';
      seen.insert(std::move(g));
      ++total;
    }
  } else if (text.size() >= 64) {
    // Text without spaces (CJK, or one long run): character 8-grams.
    constexpr std::size_t kChars = 8;
    for (std::size_t i = 0; i + kChars <= text.size(); ++i) {
      seen.emplace(text.substr(i, kChars));
      ++total;
    }
  }
  if (total == 0) return 0.0;
  return 1.0 - static_cast<double>(seen.size()) / static_cast<double>(total);
}

}  // namespace fp4forge::probe
