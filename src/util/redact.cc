// Secrets by shape (include/fp4forge/util/redact.h).
#include "fp4forge/util/redact.h"

#include "fp4forge/util/strings.h"

#include <algorithm>
#include <array>
#include <vector>
#include <cctype>

namespace fp4forge::util {
namespace {

bool url_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || std::string_view("-._~:/?#[]@!$&'()*+,;=%").find(c) !=
                                                                 std::string_view::npos;
}

}  // namespace

bool is_secret_name(std::string_view name) {
  // A name is read word by word (split at anything but a letter or a digit, and at a lower-to-upper case step:
  // `x-api-key`, `apiKey`, `AWS_SECRET`): a word holding a secret word is a secret, unless it is an ordinary word
  // that merely contains one (issue 55: `max_tokens`, `keyboard`, `author` were masked). Unknown compounds
  // (`apikey`, `mykey`) stay secrets: a masked ordinary word costs a line, a shown secret costs the key.
  static constexpr std::array<std::string_view, 12> kWords{"key",     "token",   "secret",  "password",
                                                           "passwd",  "credential", "auth", "private",
                                                           "cookie",  "session", "signature", "sig"};
  static constexpr std::array<std::string_view, 27> kOrdinary{
      "tokens",   "tokenizer", "tokenizers", "tokenize",  "tokenized", "tokenization", "detokenize",
      "keyboard", "keyword",   "keywords",   "keynote",   "keyframe",  "keyframes",    "keystone",
      "monkey",   "donkey",    "turkey",     "hockey",    "jockey",    "whiskey",      "author",
      "authors",  "authored",  "authoring",  "authority", "secretary", "secretaries"};
  std::vector<std::string> words;
  std::string cur;
  char prev = '\0';
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    const bool alnum = std::isalnum(u) != 0;
    if (!alnum || (std::isupper(u) != 0 && std::islower(static_cast<unsigned char>(prev)) != 0)) {
      if (!cur.empty()) words.push_back(std::move(cur));
      cur.clear();
    }
    if (alnum) cur += static_cast<char>(std::tolower(u));
    prev = c;
  }
  if (!cur.empty()) words.push_back(std::move(cur));
  // A secret word as a unit or a setting's subject is no secret: `input_cost_per_token` (a price per token),
  // `session_ttl`, `token_limit` (issue 55 audit: LiteLLM's cost keys were masked).
  static constexpr std::array<std::string_view, 10> kMeasures{"ttl",    "timeout", "seconds",  "secs",   "limit",
                                                              "limits", "expiry",  "duration", "budget", "rate"};
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (std::find(kOrdinary.begin(), kOrdinary.end(), w) != kOrdinary.end()) continue;
    if (i > 0 && words[i - 1] == "per") continue;
    if (i + 1 < words.size() && std::find(kMeasures.begin(), kMeasures.end(), words[i + 1]) != kMeasures.end()) continue;
    for (auto s : kWords) {
      if (s == "sig" ? w == "sig" : w.find(s) != std::string::npos) return true;
    }
  }
  return false;
}

std::string redact_url(std::string_view url) {
  std::string out(url);
  const std::size_t scheme = out.find("://");
  const std::size_t auth_start = scheme == std::string::npos ? 0 : scheme + 3;
  // The userinfo ends at the last '@' before the path. A password may hold an unencoded '#' or '?' (R4-B4:
  // `http://admin:p#SECRET@host` printed whole when they were taken for the fragment or the query) or even a
  // '/': a ':' followed by something other than a port before the first '/' starts a password, which runs to
  // the next '@'.
  const std::size_t path_start = out.find('/', auth_start);
  std::size_t at = out.rfind('@', path_start == std::string::npos ? std::string::npos : path_start);
  if (scheme != std::string::npos && (at == std::string::npos || at < auth_start)) {
    const std::size_t colon = out.find(':', auth_start);
    const std::size_t port_end = colon == std::string::npos ? colon : out.find_first_not_of("0123456789", colon + 1);
    if (colon != std::string::npos && colon < path_start && port_end != std::string::npos && port_end != path_start)
      at = out.find('@', colon);
  }
  if (scheme != std::string::npos && at != std::string::npos && at >= auth_start) {
    const std::size_t colon = out.find(':', auth_start);
    if (colon != std::string::npos && colon < at)
      out.replace(colon + 1, at - colon - 1, "***");
    else
      out.replace(auth_start, at - auth_start, "***");  // a bare token as the user name
  }
  const std::size_t q = out.find('?');
  if (q == std::string::npos) return out;
  std::size_t i = q + 1;
  while (i < out.size()) {
    std::size_t end = out.find_first_of("&#", i);
    if (end == std::string::npos) end = out.size();
    const std::size_t eq = out.find('=', i);
    if (eq != std::string::npos && eq < end && is_secret_name(std::string_view(out).substr(i, eq - i)) &&
        end > eq + 1) {
      out.replace(eq + 1, end - eq - 1, "***");
      end = eq + 4;
    }
    if (end >= out.size() || out[end] == '#') break;
    i = end + 1;
  }
  return out;
}

std::string redact_line(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  // PEM: the base64 body lines of a private key and the BEGIN line's payload never print.
  if (line.find("PRIVATE KEY-----") != std::string_view::npos || line.find("\\n") != std::string_view::npos) {
    if (line.find("-----BEGIN") != std::string_view::npos && line.find("PRIVATE KEY") != std::string_view::npos) {
      const std::size_t b = line.find("-----BEGIN");
      return std::string(line.substr(0, b)) + "***";
    }
  }
  std::size_t i = 0;
  while (i < line.size()) {
    const std::size_t s = line.find("://", i);
    // Bearer / Basic tokens before the next URL.
    const std::size_t stop = s == std::string_view::npos ? line.size() : s;
    std::string seg(line.substr(i, stop - i));
    for (std::string_view word : {"Bearer ", "bearer ", "Basic ", "basic "}) {
      std::size_t p = 0;
      while ((p = seg.find(word, p)) != std::string::npos) {
        std::size_t t = p + word.size();
        std::size_t e = t;
        while (e < seg.size() && !std::isspace(static_cast<unsigned char>(seg[e])) && seg[e] != '"' &&
               seg[e] != '\'' && seg[e] != ',' && seg[e] != '}')
          ++e;
        // A short word of lower-case letters after it is prose ("Bearer of bad news"), not a token (issue 55
        // tryout); a token has six characters or more, or something other than a lower-case letter.
        const std::string_view tok(seg.data() + t, e - t);
        const bool prose =
            tok.size() < 6 && std::all_of(tok.begin(), tok.end(), [](char c) { return c >= 'a' && c <= 'z'; });
        if (e > t && !prose) seg.replace(t, e - t, "***");
        p = e > t && !prose ? t + 3 : e;
      }
    }
    if (s == std::string_view::npos) {
      out += seg;
      break;
    }
    // The URL: back to the start of its scheme, forward over URL characters.
    std::size_t b = seg.size();
    while (b > 0 && (std::isalnum(static_cast<unsigned char>(seg[b - 1])) != 0 || seg[b - 1] == '+' ||
                     seg[b - 1] == '-' || seg[b - 1] == '.'))
      --b;
    out += seg.substr(0, b);
    std::size_t e = s + 3;
    while (e < line.size() && url_char(line[e])) ++e;
    out += redact_url(std::string(seg.substr(b)) + std::string(line.substr(s, e - s)));
    i = e;
  }
  return out;
}

}  // namespace fp4forge::util
