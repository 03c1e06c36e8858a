#include "fp4forge/kvplan/gpu.h"

#include <cstdio>
#include <sys/wait.h>

#include <cctype>
#include <charconv>

#include "fp4forge/util/size.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/strings.h"

namespace fp4forge::kvplan {
namespace {

using util::split;
using util::trim;

Error gpu_error(std::string_view text, std::string_view why) {
  return make_error(Errc::USAGE, "invalid --gpu '{}': {}; expected ID=TOTAL[:used=SIZE][:name=NAME], e.g. "
                    "--gpu 0=96GiB:used=41GiB", text, why);
}

}  // namespace

Result<GpuSpec> parse_gpu_arg(std::string_view text) {
  const std::size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) return gpu_error(text, "missing 'ID='");
  GpuSpec g;
  g.id = std::string(text.substr(0, eq));
  for (char c : g.id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'))
      return gpu_error(text, "the ID may hold letters, digits, '-' and '_' only");
  const auto parts = split(text.substr(eq + 1), ':');
  auto total = parse_size(parts[0]);
  if (!total.ok()) return gpu_error(text, total.error().message);
  g.total_bytes = *total;
  if (g.total_bytes == 0) return gpu_error(text, "TOTAL is 0");
  bool seen_used = false, seen_name = false;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::size_t e = parts[i].find('=');
    const std::string_view key = parts[i].substr(0, e);
    if (e == std::string_view::npos) return gpu_error(text, fmt::format("'{}' is not key=value", parts[i]));
    const std::string_view val = parts[i].substr(e + 1);
    if (key == "used" && !seen_used) {
      auto u = parse_size(val);
      if (!u.ok()) return gpu_error(text, u.error().message);
      g.used_bytes = *u;
      seen_used = true;
    } else if (key == "name" && !seen_name) {
      g.name = std::string(val);
      seen_name = true;
    } else {
      return gpu_error(text, fmt::format("unknown or repeated key '{}' (known: used, name)", key));
    }
  }
  if (g.used_bytes > g.total_bytes)
    return gpu_error(text, fmt::format("used ({}) exceeds total ({})", format_bytes(g.used_bytes),
                                       format_bytes(g.total_bytes)));
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
