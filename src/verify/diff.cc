#include "fp4forge/verify/diff.h"
#include "fp4forge/model/structure.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "fp4forge/model/arch_class.h"
#include "fp4forge/util/backup.h"
#include "fp4forge/util/first_difference.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/model/quant_config.h"
#include "fp4forge/model/tensor_names.h"
#include "fp4forge/util/format.h"
#include "fp4forge/util/strings.h"

namespace fp4forge {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::uint64_t kMaxCompareFile = 64ull << 20;


std::string module_of(std::string_view name) { return std::string(names::module_of(name)); }

std::map<std::string, FamilySide> families(const Checkpoint& c) {
  std::map<std::string, std::pair<std::set<std::string>, std::set<std::string>>> sets;
  std::map<std::string, FamilySide> out;
  for (const TensorRef& t : c.tensors()) {
    const std::string f = family_of(t.name);
    auto& side = out[f];
    ++side.count;
    sets[f].first.insert(std::string(dtype_name(t.info->dtype)));
    sets[f].second.insert(format_shape(t.info->shape));
  }
  for (auto& [f, side] : out) {
    side.dtypes.assign(sets[f].first.begin(), sets[f].first.end());
    side.shapes.assign(sets[f].second.begin(), sets[f].second.end());
  }
  return out;
}

void flatten(const Json& j, const std::string& path, std::map<std::string, std::string>& out) {
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten(it.value(), path.empty() ? it.key() : path + "." + it.key(), out);
    return;
  }
  out[path] = j.dump();
}

/** Expanded ignore of one side, as families: what the side's own `ignore` matches among its modules. */
struct QcView {
  bool present = false;
  std::string error;  // parse error
  QuantConfig qc;
  std::set<std::string> ignored_families;
  std::string scheme;  // "NVFP4A16 (float 4-bit tensor_group group 16)" per group, joined
};

QcView view_qc(const Checkpoint& c) {
  QcView v;
  const Json* j = find_quant_config(c.config());
  if (!j) return v;
  v.present = true;
  auto p = parse_quant_config(*j);
  if (!p.ok()) {
    v.error = p.error().message;
    return v;
  }
  v.qc = std::move(p).value();
  std::vector<std::string> schemes;
  for (const auto& g : v.qc.groups) {
    const SchemeInfo si = detect_scheme(g, v.qc.format);
    schemes.push_back(fmt::format("{} ({}, targets {})", scheme_label(g, v.qc.format), si.detail, fmt::join(g.targets, ",")));
  }
  std::sort(schemes.begin(), schemes.end());
  v.scheme = fmt::format("{}", fmt::join(schemes, "; "));
  auto m = IgnoreMatcher::compile(v.qc.ignore);
  if (!m.ok()) {
    v.error = m.error().message;
    return v;
  }
  std::set<std::string> modules;
  // Modules are tensor names without the parameter; a fused 3-D expert tensor `P.experts.gate_up_proj`
  // yields `P.experts`, the prefix vLLM's FusedMoE checks against ignore.
  for (const TensorRef& t : c.tensors()) modules.insert(module_of(t.name));
  for (const auto& mod : modules)
    if (!mod.empty() && m->matches(mod)) v.ignored_families.insert(family_of(mod));
  return v;
}

void add_item(DiffReport& r, std::string area, std::string key, std::string a, std::string b) {
  if (a == b) return;
  r.items.push_back({std::move(area), std::move(key), std::move(a), std::move(b)});
}

std::string scheme_of(const QcView& v) {
  if (!v.present) return "none";
  if (!v.error.empty() && v.qc.groups.empty()) return "invalid";
  return scheme_labels(v.qc);
}

void compare_qc(const Checkpoint& a, const Checkpoint& b, DiffReport& r) {
  const QcView va = view_qc(a), vb = view_qc(b);
  r.scheme_a = scheme_of(va);
  r.scheme_b = scheme_of(vb);
  const std::string absent = "(absent)";
  add_item(r, "quantization_config", "scheme", r.scheme_a, r.scheme_b);
  add_item(r, "quantization_config", "present", va.present ? "yes" : "no", vb.present ? "yes" : "no");
  if (!va.present && !vb.present) return;
  add_item(r, "quantization_config", "error", va.error.empty() ? absent : va.error, vb.error.empty() ? absent : vb.error);
  if (!va.present || !vb.present || !va.error.empty() || !vb.error.empty()) return;
  add_item(r, "quantization_config", "quant_method", va.qc.quant_method, vb.qc.quant_method);
  add_item(r, "quantization_config", "format", va.qc.format, vb.qc.format);
  add_item(r, "quantization_config", "quantization_status", va.qc.quantization_status, vb.qc.quantization_status);
  add_item(r, "quantization_config", "config_groups", va.scheme, vb.scheme);
  add_item(r, "quantization_config", "kv_cache_scheme", va.qc.kv_cache_scheme ? "set" : "null",
           vb.qc.kv_cache_scheme ? "set" : "null");
  std::set<std::string> all = va.ignored_families;
  all.insert(vb.ignored_families.begin(), vb.ignored_families.end());
  for (const auto& f : all) {
    const bool ia = va.ignored_families.count(f) > 0, ib = vb.ignored_families.count(f) > 0;
    if (ia != ib)
      add_item(r, "quantization_config", "ignore: " + f, ia ? "ignored" : "not ignored", ib ? "ignored" : "not ignored");
  }
  // Every other field of the two quantization_configs, leaf by leaf (a group's observer, symmetric, dynamic,
  // actorder, the version, sparsity_config, ...): what the items above do not say (issue 55: two outputs whose
  // only difference was the observer were IDENTICAL). The group fields are compared when the groups' schemes
  // agree (else config_groups above says it); ignore is compared by what it matches, not by its spelling.
  std::map<std::string, std::string> la, lb;
  const auto leaves = [&](const Json& j, std::map<std::string, std::string>& out) {
    Json c = j;
    for (const char* k : {"quant_method", "format", "quantization_status", "ignore"}) c.erase(k);
    if (!va.qc.kv_cache_scheme || !vb.qc.kv_cache_scheme) c.erase("kv_cache_scheme");
    if (va.scheme != vb.scheme) c.erase("config_groups");
    flatten(c, "", out);
  };
  leaves(*find_quant_config(a.config()), la);
  leaves(*find_quant_config(b.config()), lb);
  std::set<std::string> paths;
  for (const auto& [k, v] : la) paths.insert(k);
  for (const auto& [k, v] : lb) paths.insert(k);
  for (const auto& k : paths) {
    auto ia = la.find(k), ib = lb.find(k);
    add_item(r, "quantization_config", k, ia == la.end() ? absent : ia->second, ib == lb.end() ? absent : ib->second);
  }
}

void compare_files(const Checkpoint& a, const Checkpoint& b, DiffReport& r) {
  // config.json keys (quantization_config is compared above).
  std::map<std::string, std::string> ca, cb;
  Json ja = a.config(), jb = b.config();
  for (Json* j : {&ja, &jb}) {
    if (!j->is_object()) continue;
    j->erase("quantization_config");
    j->erase("compression_config");
  }
  flatten(ja, "", ca);
  flatten(jb, "", cb);
  std::set<std::string> keys;
  for (const auto& [k, v] : ca) keys.insert(k);
  for (const auto& [k, v] : cb) keys.insert(k);
  for (const auto& k : keys) {
    auto ia = ca.find(k), ib = cb.find(k);
    add_item(r, "config", k, ia == ca.end() ? "(absent)" : ia->second, ib == cb.end() ? "(absent)" : ib->second);
  }
  // Other files (tokenizer, processor, generation config ...).
  std::set<std::string> fa(a.other_files().begin(), a.other_files().end());
  std::set<std::string> fb(b.other_files().begin(), b.other_files().end());
  std::set<std::string> names = fa;
  names.insert(fb.begin(), fb.end());
  names.erase("config.json");
  for (const auto& n : names) {
    // A backup doctor --fix or gateway wrote is no part of the checkpoint (tryout N-L3: every folder ever fixed
    // differed from its control by one).
    if (backup::is_backup_name(n)) {
      r.backups_skipped.push_back(n);
      continue;
    }
    const bool ina = fa.count(n) > 0, inb = fb.count(n) > 0;
    if (!ina || !inb) {
      add_item(r, "file", n, ina ? "present" : "(absent)", inb ? "present" : "(absent)");
      continue;
    }
    auto ra = fs::read_file(a.dir() / n, kMaxCompareFile);
    auto rb = fs::read_file(b.dir() / n, kMaxCompareFile);
    if (!ra.ok() || !rb.ok()) {
      add_item(r, "file", n, ra.ok() ? "readable" : "unreadable: " + ra.error().message,
               rb.ok() ? "readable" : "unreadable: " + rb.error().message);
      continue;
    }
    if (*ra != *rb) add_item(r, "file", n, fmt::format("{} bytes", ra->size()), fmt::format("{} bytes (content differs)", rb->size()));
  }
}

}  // namespace

std::string family_of(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  std::size_t start = 0;
  while (start <= name.size()) {
    const auto dot = name.find('.', start);
    const std::string_view comp = name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    const bool digits = !comp.empty() && std::all_of(comp.begin(), comp.end(), [](char c) { return c >= '0' && c <= '9'; });
    out += digits ? std::string_view("*") : comp;
    if (dot == std::string_view::npos) break;
    out += '.';
    start = dot + 1;
  }
  return out;
}

bool FamilyRow::differs() const noexcept { return !what().empty(); }

std::string FamilyRow::what() const {
  if (!in_a) return "only in B";
  if (!in_b) return "only in A";
  std::vector<std::string> w;
  if (a.count != b.count) w.push_back("count");
  if (a.dtypes != b.dtypes) w.push_back("dtype");
  if (a.shapes != b.shapes) w.push_back("shape");
  return fmt::format("{}", fmt::join(w, ","));
}

bool DiffReport::differs() const noexcept {
  if (class_mismatch || !items.empty()) return true;
  return std::any_of(families.begin(), families.end(), [](const FamilyRow& f) { return f.differs(); });
}

namespace {
// The bytes of every tensor both sides hold with one dtype and shape: one "values" item per family with differing
// tensors ("N of M differ", the first name).
void compare_values(const Checkpoint& a, const Checkpoint& b, DiffReport& r) {
  r.values_compared = true;
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> per_family;  // family -> (differ, compared)
  std::map<std::string, std::string> first;  // family -> "NAME at byte X" of its first differing tensor
  for (const TensorRef& ta : a.tensors()) {
    const TensorRef* tb = b.find(ta.name);
    if (tb == nullptr || tb->info->dtype != ta.info->dtype || tb->info->shape != ta.info->shape) continue;
    const auto da = a.data(ta), db = b.data(*tb);
    const std::optional<std::uint64_t> at = first_difference(da, db);
    auto& [differ, compared] = per_family[family_of(ta.name)];
    ++compared;
    if (!at) {
      ++r.values_same;
      continue;
    }
    ++differ;
    ++r.values_differ;
    first.emplace(family_of(ta.name), fmt::format("{} at byte {} of {}", ta.name, *at, da.size()));
  }
  // One statement of both sides per family: `a` says it, `b` is empty (issue 55 tryout J: "B: (the other side)").
  for (const auto& [fam, counts] : per_family)
    if (counts.first > 0)
      r.items.push_back(
          {"values", fam,
           fmt::format("{} of {} tensors' bytes differ (first: {})", counts.first, counts.second, first[fam]), ""});
}
}  // namespace

namespace {

/** What a control of class `x` hides about a candidate of class `y` (or the reverse): one clause per way the two
 * classes differ, the MoE one first (issue 55: a MoE-vs-MoE or multimodal-vs-text pair was told about routers). */
std::string class_gap(const ArchClass& x, const ArchClass& y) {
  std::vector<std::string> why;
  if (x.moe != y.moe)
    why.emplace_back("a dense control has no routers or experts, so quantized routers never appear as a difference "
                     "(F2)");
  else if (x.moe && x.num_experts != y.num_experts)
    why.push_back(fmt::format("the two MoE sides have {} and {} experts, so their expert and router tensors cannot be "
                              "paired one to one", x.num_experts, y.num_experts));
  if (x.hybrid != y.hybrid)
    why.emplace_back("only one side has linear-attention (GatedDeltaNet) layers, whose projections and state "
                     "parameters the other cannot show kept or quantized");
  if (x.multimodal != y.multimodal)
    why.emplace_back("only one side has a vision / audio tower, so a tower quantized (or dropped) never appears as "
                     "a difference");
  if (why.empty()) why.emplace_back("their module sets differ");
  std::string out;
  for (std::size_t i = 0; i < why.size(); ++i) out += (i == 0 ? "" : "; ") + why[i];
  return out;
}

}  // namespace

Result<DiffReport> diff_checkpoints(const Checkpoint& a, const Checkpoint& b, const DiffOptions& opts) {
  FP4FORGE_ASSIGN_OR_RETURN(ModelInfo ia, read_checkpoint_info(a));
  FP4FORGE_ASSIGN_OR_RETURN(ModelInfo ib, read_checkpoint_info(b));
  DiffReport r;
  r.a_dir = a.dir().string();
  r.b_dir = b.dir().string();
  r.class_a = classify_arch(a, ia);
  r.class_b = classify_arch(b, ib);
  r.family_a = std::string(family_name(ia.family));
  r.family_b = std::string(family_name(ib.family));
  r.tensors_a = a.tensors().size();
  r.tensors_b = b.tensors().size();
  if (!(r.class_a == r.class_b)) {
    r.class_mismatch = true;
    r.class_message = fmt::format(
        "ARCHITECTURE CLASS MISMATCH: A is {} ({}), B is {} ({}). A control of another class cannot show what the "
        "candidate lacks: {}. {}",
        r.class_a.describe(), r.family_a, r.class_b.describe(), r.family_b, class_gap(r.class_a, r.class_b),
        opts.allow_class_mismatch ? "Comparing anyway (--allow-class-mismatch)."
                                  : "Refusing; use a control of the same class, or pass --allow-class-mismatch.");
    if (!opts.allow_class_mismatch) {
      r.refused = true;
      return r;
    }
  }
  const auto fa = families(a), fb = families(b);
  std::set<std::string> names;
  for (const auto& [f, s] : fa) names.insert(f);
  for (const auto& [f, s] : fb) names.insert(f);
  for (const auto& f : names) {
    FamilyRow row;
    row.family = f;
    if (auto it = fa.find(f); it != fa.end()) {
      row.in_a = true;
      row.a = it->second;
    }
    if (auto it = fb.find(f); it != fb.end()) {
      row.in_b = true;
      row.b = it->second;
    }
    r.families.push_back(std::move(row));
  }
  compare_qc(a, b, r);
  if (opts.compare_files) compare_files(a, b, r);
  if (opts.compare_values) compare_values(a, b, r);
  return r;
}

namespace {

Json class_json(const ArchClass& c, const std::string& family) {
  return Json{{"class", c.str()}, {"moe", c.moe}, {"hybrid", c.hybrid}, {"multimodal", c.multimodal},
              {"num_experts", c.num_experts}, {"family", family}};
}

Json side_json(const FamilySide& s, bool present) {
  if (!present) return nullptr;
  return Json{{"count", s.count}, {"dtypes", s.dtypes}, {"shapes", s.shapes}};
}

std::string side_text(const FamilySide& s, bool present) {
  if (!present) return "-";
  return fmt::format("{} {} {}", s.count, fmt::join(s.dtypes, "|"), fmt::join(s.shapes, "|"));
}

std::string truncate(std::string s, std::size_t n) {
  if (s.size() <= n) return s;
  return s.substr(0, n - 3) + "...";
}

}  // namespace

nlohmann::ordered_json to_json(const DiffReport& r) {
  const std::string& a_dir = r.a_dir;
  const std::string& b_dir = r.b_dir;
  Json j;
  j["ok"] = exit_code(r) == 0;  // every command's --json leads with it (issue 55): identical and compared
  j["identical"] = !r.differs();
  j["refused"] = r.refused;
  j["a"] = a_dir;
  j["b"] = b_dir;
  j["class"] = {{"a", class_json(r.class_a, r.family_a)},
                {"b", class_json(r.class_b, r.family_b)},
                {"mismatch", r.class_mismatch},
                {"message", r.class_mismatch ? Json(r.class_message) : Json(nullptr)}};
  j["scheme"] = {{"a", r.refused ? Json(nullptr) : Json(r.scheme_a)},
                 {"b", r.refused ? Json(nullptr) : Json(r.scheme_b)},
                 {"mismatch", !r.refused && r.scheme_mismatch()}};
  j["tensors"] = {{"a", r.tensors_a}, {"b", r.tensors_b}};
  Json fams = Json::array();
  std::size_t ndiff = 0;
  for (const auto& f : r.families) {
    const std::string w = f.what();
    if (!w.empty()) ++ndiff;
    fams.push_back({{"family", f.family},
                    {"differs", !w.empty()},
                    {"what", w.empty() ? Json(nullptr) : Json(w)},
                    {"a", side_json(f.a, f.in_a)},
                    {"b", side_json(f.b, f.in_b)}});
  }
  j["families_differing"] = ndiff;
  j["families"] = std::move(fams);
  Json items = Json::array();
  for (const auto& i : r.items) items.push_back({{"area", i.area}, {"key", i.key}, {"a", i.a}, {"b", i.b}});
  j["items"] = std::move(items);
  j["backups_skipped"] = r.backups_skipped;
  j["values"] = r.values_compared ? Json{{"compared", r.values_same + r.values_differ}, {"differ", r.values_differ}}
                                  : Json(nullptr);
  return j;
}

std::string to_text(const DiffReport& r, bool all) {
  // Paths, names, config keys and values come from the two checkpoints: escaped (R4-B5).
  const auto esc = [](std::string_view x) { return util::printable(x, util::kReportLine); };
  const std::string a_dir = esc(r.a_dir);
  const std::string b_dir = esc(r.b_dir);
  std::string out;
  out += fmt::format("diff  A = {}\n      B = {}\n", a_dir, b_dir);
  if (r.class_mismatch) {
    out += "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n";
    out += "!! " + esc(r.class_message) + "\n";
    out += "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n";
  } else {
    out += fmt::format("class: A {} ({}) · B {} ({}) — same class\n", r.class_a.describe(), esc(r.family_a),
                       r.class_b.describe(), esc(r.family_b));
  }
  if (r.refused) {
    out += "result: REFUSED (architecture class mismatch)\n";
    return out;
  }
  if (r.scheme_mismatch())
    out += fmt::format("scheme: A {} · B {} — DIFFERENT SCHEMES: their quantized tensors differ by construction "
                       "(names, dtypes, shapes); compare quantizations of one scheme\n",
                       esc(r.scheme_a), esc(r.scheme_b));
  else
    out += fmt::format("scheme: {} on both sides\n", esc(r.scheme_a));
  std::size_t ndiff = 0;
  for (const auto& f : r.families) ndiff += f.differs() ? 1 : 0;
  out += fmt::format("tensors: A {} · B {}; families: {} total, {} differ\n", r.tensors_a, r.tensors_b,
                     r.families.size(), ndiff);
  std::vector<std::array<std::string, 4>> rows;
  for (const auto& f : r.families) {
    const std::string w = f.what();
    if (w.empty() && !all) continue;
    rows.push_back({esc(f.family), esc(truncate(side_text(f.a, f.in_a), 40)), esc(truncate(side_text(f.b, f.in_b), 40)),
                    w.empty() ? "=" : esc(w)});
  }
  if (!rows.empty()) {
    std::array<std::size_t, 4> width{6, 1, 1, 4};
    for (const auto& row : rows)
      for (std::size_t i = 0; i < 4; ++i) width[i] = std::max(width[i], row[i].size());
    out += fmt::format("  {:<{}}  {:<{}}  {:<{}}  {}\n", "family", width[0], "A", width[1], "B", width[2], "diff");
    for (const auto& row : rows)
      out += fmt::format("  {:<{}}  {:<{}}  {:<{}}  {}\n", row[0], width[0], row[1], width[1], row[2], width[2], row[3]);
  }
  std::string area;
  for (const auto& i : r.items) {
    if (i.area != area) {
      area = i.area;
      out += esc(area) + ":\n";
    }
    if (i.area == "values")
      out += fmt::format("  {}: {}\n", esc(i.key), esc(truncate(i.a, 300)));
    else
      out +=
          fmt::format("  {}\n      A: {}\n      B: {}\n", esc(i.key), esc(truncate(i.a, 200)), esc(truncate(i.b, 200)));
  }
  if (r.values_compared)
    out += fmt::format("values: {} tensors compared byte for byte, {} differ\n", r.values_same + r.values_differ,
                       r.values_differ);
  if (!r.backups_skipped.empty())
    out += fmt::format("not compared: {} backup(s) fp4forge wrote (no part of the checkpoint): {}\n",
                       r.backups_skipped.size(),
                       esc(truncate(fmt::format("{}", fmt::join(r.backups_skipped, ", ")), 300)));
  out += fmt::format("result: {}\n", r.differs()          ? "DIFFERENT"
                                     : r.values_compared ? "IDENTICAL (structure, config, files and every tensor's bytes)"
                                                         : "IDENTICAL in structure, config and files (tensor values not "
                                                           "compared: --values compares them)");
  return out;
}

int exit_code(const DiffReport& r) {
  if (r.refused) return 3;
  return r.differs() ? 1 : 0;
}

}  // namespace fp4forge
