#include "fp4forge/kvplan/gpu.h"

#include <cstdio>
#include <sys/wait.h>

#include <cctype>
#include <algorithm>
#include <charconv>
#include <optional>

#include "fp4forge/util/size.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/strings.h"

namespace fp4forge::kvplan {
namespace {

using util::split;
using util::trim;

/** A --gpu error about one value: what and where, the expectation in `why`. */
Error gpu_error(std::string_view text, std::string_view why) {
  return make_error(Errc::USAGE, "invalid --gpu '{}': {}", text, why);
}

/** A --gpu whose shape is wrong (no ID=, a piece that is not key=value, an unknown key): the syntax is the hint. */
Error gpu_syntax_error(std::string_view text, std::string_view why) {
  return make_error(Errc::USAGE, "invalid --gpu '{}': {}; expected ID=TOTAL[:used=SIZE][:name=NAME]"
                    "[:reserved=SIZE|:torch_total=SIZE][:headroom=SIZE][:unified][:free=SIZE], e.g. --gpu "
                    "0=96GiB:used=41GiB", text, why);
}

/** The hint for a TOTAL written without a unit (below 1 GiB as bytes): a figure of 1024 or more is nvidia-smi's
 * MiB (memory.total), a smaller one GiB or GB. */
std::string unitless_total_hint(std::string_view digits) {
  std::uint64_t n = 0;
  const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (r.ec == std::errc() && r.ptr == digits.data() + digits.size() && n >= 1024)
    return fmt::format("if it is nvidia-smi's memory.total, that is MiB: write {}MiB ({})", digits,
                       format_bytes(n * kMiB));
  return fmt::format("write the unit, e.g. {}GiB or {}GB, or nvidia-smi's figure in MiB such as 97887MiB", digits,
                     digits);
}

/** A card whose torch total is known: nvidia-smi's memory.total (MiB) and the total torch prints. */
struct KnownCard {
  std::string_view match;     // lower-case substring of the product name
  std::uint64_t smi_mib;      // nvidia-smi memory.total
  double torch_gib;           // torch.cuda.mem_get_info()[1] / 2^30, as printed (2 decimals)
  std::string_view card;      // the card measured, as nvidia-smi names it
};
constexpr KnownCard kKnownCards[] = {
    {"h200", 143771, 139.72, "NVIDIA H200"},
    {"h100", 81559, 79.19, "NVIDIA H100 80GB HBM3"},
    {"a100", 81920, 79.15, "NVIDIA A100-SXM4-80GB"},
    {"a100", 40960, 39.39, "NVIDIA A100-SXM4-40GB"},
    {"4090", 24564, 23.65, "NVIDIA GeForce RTX 4090"},
    {"3090", 24576, 23.69, "NVIDIA GeForce RTX 3090"},
    {"l4", 23034, 22.05, "NVIDIA L4"},
};

/** The card's tag as a word of the lower-case name ("l4" is no word of "nvidia l40s"). */
bool names_chip(std::string_view lower, const KnownCard& c) {
  const std::size_t at = lower.find(c.match);
  if (at == std::string_view::npos) return false;
  const std::size_t end = at + c.match.size();
  return !(at > 0 && std::isalnum(static_cast<unsigned char>(lower[at - 1]))) &&
         !(end < lower.size() && std::isalnum(static_cast<unsigned char>(lower[end])));
}

/** The name is the measured card's own, with or without the vendor word (not only its chip: "NVIDIA H100 PCIe" is
 * an H100, not the H100 80GB HBM3 measured; issue 55 tryout E-5). */
bool is_card_name(std::string_view lower, const KnownCard& c) {
  const std::string card = util::ascii_lower(c.card);
  const std::string_view t = util::trim(lower);
  return t == card || (card.rfind("nvidia ", 0) == 0 && t == std::string_view(card).substr(7));
}

}  // namespace

std::uint64_t driver_reserved_bytes(std::uint64_t total_bytes, std::string_view name, std::string* source) {
  const std::string lower = util::ascii_lower(name);
  for (const KnownCard& c : kKnownCards) {
    const std::uint64_t smi = c.smi_mib * kMiB;
    // The same card: its name, and a total within 1 % of the one measured (a 40 GB and an 80 GB A100).
    const std::uint64_t diff = total_bytes > smi ? total_bytes - smi : smi - total_bytes;
    if (!names_chip(lower, c) || diff * 100 > smi) continue;
    const auto torch = static_cast<std::uint64_t>(c.torch_gib * static_cast<double>(kGiB));
    // The reference card's figures, named as its own (issue 55 tryout: "measured on <the name typed>" with a torch
    // total other than this GPU's read as this GPU's measurement).
    // A total near but not at the card's own (141GiB for an H200's 143771 MiB) is planned as given, and said.
    if (source)
      *source = fmt::format(
          "as measured on an {} (nvidia-smi {} MiB, torch {:.2f} GiB: the difference), {}{}", c.card, c.smi_mib,
          c.torch_gib,
          is_card_name(lower, c)
              ? std::string("the card this name and total match")
              : fmt::format("the measured card of this name's chip and total ('{}' itself is not measured: give "
                            "reserved= or torch_total= if its figures differ)",
                            util::printable(name, 64)),
          diff < kMiB ? std::string()
                      : fmt::format("; the total given is {} {} its nvidia-smi figure and is "
                                    "planned as given: write {}MiB if this is that card",
                                    format_bytes(diff), total_bytes > smi ? "above" : "below", c.smi_mib));
    return smi > torch ? smi - torch : 0;
  }
  if (source) *source = std::string(kReserveDefaultEstimate);
  return std::min(kDefaultDriverReserve, total_bytes / 10);
}

std::string card_total_hint(std::uint64_t total_bytes, std::string_view name) {
  const std::string lower = util::ascii_lower(name);
  // The card's tag as a word of the name ("l4" is not an L40S's), the nearest total among those (two A100s).
  const KnownCard* best = nullptr;
  std::uint64_t best_diff = 0;
  for (const KnownCard& c : kKnownCards) {
    if (!names_chip(lower, c)) continue;
    const std::uint64_t smi = c.smi_mib * kMiB;
    const std::uint64_t diff = total_bytes > smi ? total_bytes - smi : smi - total_bytes;
    if (diff * 100 <= smi) return {};  // matched: driver_reserved_bytes says so
    if (best == nullptr || diff < best_diff) best = &c, best_diff = diff;
  }
  if (best == nullptr) return {};
  // One statement, no "no card matches X; the name is X's" (issue 55 tryout E-5).
  return fmt::format(
      "the total given is no measured card's: {} an {}, whose nvidia-smi total is {} MiB ({}), not {}: write {}MiB "
      "if this is that card (GB is decimal, GiB and nvidia-smi's MiB binary)",
      is_card_name(lower, *best) ? "the name is that of" : "the measured card of this name's chip is", best->card,
      best->smi_mib, format_bytes(best->smi_mib * kMiB), format_bytes(total_bytes), best->smi_mib);
}

Result<GpuSpec> parse_gpu_arg(std::string_view text) {
  const std::size_t eq = text.find('=');
  // A value with no '=' at all is most often a word of an unquoted name= (issue 55 tryout: "NVIDIA GeForce RTX 4090").
  if (eq == std::string_view::npos)
    return gpu_syntax_error(text,
                            "missing 'ID=' (a word of a GPU name? quote a name with spaces: --gpu "
                            "'1=24GiB:name=NVIDIA GeForce RTX 4090')");
  if (eq == 0) return gpu_syntax_error(text, "missing 'ID='");
  GpuSpec g;
  g.id = std::string(text.substr(0, eq));
  for (char c : g.id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'))
      return gpu_syntax_error(text, "the ID may hold letters, digits, '-' and '_' only");
  // Keys after ':' (documented) or ',' (as --seat separates its keys).
  std::vector<std::string_view> parts;
  for (std::string_view p : split(text.substr(eq + 1), ':'))
    for (std::string_view q : split(p, ',')) parts.push_back(q);
  // A bare number is bytes (exact totals stay possible), but below 1 GiB it is a missing unit, not a GPU: said with
  // GPU hints (nvidia-smi's MiB) before the size grammar's own refusal of a handful of bytes.
  const std::string_view digits = parts[0];
  std::uint64_t bare = 0;
  if (const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), bare);
      !digits.empty() && r.ec == std::errc() && r.ptr == digits.data() + digits.size() && bare < kGiB)
    return gpu_error(text, fmt::format("TOTAL '{}' has no unit, so it is {} bytes, below any GPU; hint: {}", parts[0],
                                       parts[0], unitless_total_hint(parts[0])));
  auto total = parse_size(parts[0]);
  // A card's name where its total belongs (`0=H100`, issue 55 tryout G): the name has its own key.
  if (!total.ok() && !parts[0].empty() && std::isalpha(static_cast<unsigned char>(parts[0][0])))
    return gpu_error(text, fmt::format("{}; hint: TOTAL comes first and a card's name after it, e.g. --gpu "
                                       "'{}=81559MiB:name={}' (nvidia-smi --query-gpu=memory.total,name gives both)",
                                       total.error().message, g.id, parts[0]));
  if (!total.ok()) return gpu_error(text, total.error().message);
  g.total_bytes = *total;
  if (g.total_bytes == 0) return gpu_error(text, "TOTAL is 0");
  bool seen_used = false, seen_name = false, seen_unified = false;
  std::optional<std::uint64_t> reserved, torch_total;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::size_t e = parts[i].find('=');
    const std::string_view key = parts[i].substr(0, e);
    if (key == "unified" && !seen_unified) {  // a bare flag, or unified=on|off
      const std::string_view v = e == std::string_view::npos ? "on" : parts[i].substr(e + 1);
      if (v != "on" && v != "off") return gpu_error(text, fmt::format("unified='{}': expected on or off", v));
      g.unified = v == "on";
      seen_unified = true;
      continue;
    }
    if (e == std::string_view::npos) return gpu_syntax_error(text, fmt::format("'{}' is not key=value", parts[i]));
    const std::string_view val = parts[i].substr(e + 1);
    if (key == "used" && !seen_used) {
      auto u = parse_size(val);
      if (!u.ok()) return gpu_error(text, u.error().message);
      g.used_bytes = *u;
      seen_used = true;
    } else if (key == "name" && !seen_name) {
      // An empty value is a usage error, as every empty value (docs/cli/README.md; issue 55 tryout: accepted)
      if (val.empty())
        return gpu_error(text,
                         "name= is empty; give the product name nvidia-smi prints (quoted when it holds spaces), "
                         "or leave name= out");
      g.name = std::string(val);
      seen_name = true;
    } else if (key == "headroom" && !g.headroom_given) {
      auto h = parse_size(val);
      if (!h.ok()) return gpu_error(text, h.error().message);
      g.headroom_bytes = *h;
      g.headroom_given = true;
    } else if (key == "free" && !g.free_given) {
      auto f = parse_size(val);
      if (!f.ok()) return gpu_error(text, f.error().message);
      g.free_given = *f;
    } else if ((key == "reserved" || key == "torch_total") && !reserved && !torch_total) {
      auto v = parse_size(val);
      if (!v.ok()) return gpu_error(text, v.error().message);
      (key == "reserved" ? reserved : torch_total) = *v;
    } else {
      return gpu_syntax_error(text, fmt::format("unknown or repeated key '{}' (known: used, name, reserved or "
                                         "torch_total, headroom, unified, free)", key));
    }
  }
  if (torch_total) {
    if (*torch_total == 0 || *torch_total > g.total_bytes)
      return gpu_error(text, fmt::format("torch_total ({}) must be in (0, TOTAL ({})]", format_bytes(*torch_total),
                                         format_bytes(g.total_bytes)));
    g.reserved_bytes = g.total_bytes - *torch_total;
    g.reserved_source = "torch_total given";
  } else if (reserved) {
    if (*reserved >= g.total_bytes)
      return gpu_error(text, fmt::format("reserved ({}) must be below TOTAL ({})", format_bytes(*reserved),
                                         format_bytes(g.total_bytes)));
    g.reserved_bytes = *reserved;
    g.reserved_source = "given";
  } else if (g.unified) {
    g.reserved_bytes = 0;  // no dedicated memory for a driver to hold back; TOTAL is what torch reports
    g.reserved_source = "unified memory: TOTAL taken as torch's total";
  } else {
    g.reserved_bytes = driver_reserved_bytes(g.total_bytes, g.name, &g.reserved_source);
  }
  if (g.free_given && *g.free_given > g.torch_total())
    return gpu_error(text, fmt::format("free ({}) exceeds the total torch sees ({})", format_bytes(*g.free_given),
                                       format_bytes(g.torch_total())));
  if (g.used_bytes > g.torch_total())
    return gpu_error(text, fmt::format("used ({}) exceeds the total torch sees ({} = TOTAL - reserved {})",
                                       format_bytes(g.used_bytes), format_bytes(g.torch_total()),
                                       format_bytes(g.reserved_bytes)));
  if (g.headroom_given && g.headroom_bytes >= g.torch_total())
    return gpu_error(text, fmt::format("headroom ({}) must be below the total torch sees ({})",
                                       format_bytes(g.headroom_bytes), format_bytes(g.torch_total())));
  return g;
}

Result<std::vector<GpuSpec>> parse_nvidia_smi_csv(std::string_view csv) {
  std::vector<GpuSpec> out;
  std::size_t line_no = 0;
  for (std::string_view line : split(csv, '\n')) {
    ++line_no;
    line = trim(line);
    if (line.empty()) continue;
    const auto f = split(line, ',');
    if (f.size() != 4)
      return make_error(Errc::BAD_INPUT, "nvidia-smi output line {}: expected 4 fields (index, name, "
                        "memory.total, memory.used), got {}: '{}'", line_no, f.size(), line);
    auto mib = [&](std::string_view s, std::uint64_t& v) {
      s = trim(s);
      auto r = std::from_chars(s.data(), s.data() + s.size(), v);
      return r.ec == std::errc() && r.ptr == s.data() + s.size();
    };
    GpuSpec g;
    g.id = std::string(trim(f[0]));
    g.name = std::string(trim(f[1]));
    std::uint64_t total = 0, used = 0;
    if (g.id.empty() || !mib(f[2], total) || !mib(f[3], used) || total == 0 || used > total)
      return make_error(Errc::BAD_INPUT, "nvidia-smi output line {}: expected an index and MiB counts "
                        "(used <= total), got '{}'; hint: run with --format=csv,noheader,nounits", line_no, line);
    g.total_bytes = total * kMiB;
    g.used_bytes = used * kMiB;
    g.reserved_bytes = driver_reserved_bytes(g.total_bytes, g.name, &g.reserved_source);
    if (g.used_bytes > g.torch_total()) g.used_bytes = g.torch_total();  // nvidia-smi counts the reserve as used
    out.push_back(std::move(g));
  }
  if (out.empty()) return make_error(Errc::BAD_INPUT, "nvidia-smi listed no GPUs");
  return out;
}

Result<std::vector<GpuSpec>> query_nvidia_smi() {
  std::string cmd = std::string(kNvidiaSmiQuery) + " 2>/dev/null";
  FILE* p = fs::ops().popen(cmd.c_str(), "r");
  if (p == nullptr) return make_error(Errc::IO, "cannot run nvidia-smi; hint: use --gpu ID=TOTAL instead");
  std::string out;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0 && out.size() < (1u << 20)) out.append(buf, n);
  const int st = fs::ops().pclose(p);
  if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return make_error(Errc::IO, "'{}' failed (exit status {}); nvidia-smi is missing or found no driver; "
                      "hint: describe the GPUs with --gpu ID=TOTAL[:used=SIZE]", kNvidiaSmiQuery,
                      (st != -1 && WIFEXITED(st)) ? WEXITSTATUS(st) : -1);
  return parse_nvidia_smi_csv(out);
}

}  // namespace fp4forge::kvplan
