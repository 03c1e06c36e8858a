// splice_mtp: copies the MTP tensors of the original release into a checkpoint that lost them (F8).
#include "fp4forge/quantize/mtp_splice.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fp4forge/model/shape_rules.h"
#include "fp4forge/util/json_edit.h"
#include "fp4forge/model/classify.h"
#include "fp4forge/model/fp8_source.h"
#include "fp4forge/model/quant_config.h"
#include "fp4forge/safetensors/index.h"
#include "fp4forge/quantize/plan.h"
#include "fp4forge/safetensors/shard_writer.h"
#include "fp4forge/util/backup.h"
#include "fp4forge/util/format.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/udiff.h"
#include "fp4forge/safetensors/header.h"
#include "fp4forge/util/strings.h"

namespace fp4forge::quant {

using Json = nlohmann::ordered_json;
namespace {

namespace stdfs = std::filesystem;

constexpr const char* kFixKind = "mtp-declared-missing";
constexpr const char* kDefaultIndex = "model.safetensors.index.json";


std::string_view form_name(MtpForm f) {
  switch (f) {
    case MtpForm::MTP_MODULE: return "mtp.*";
    case MtpForm::EXTRA_LAYERS: return "extra decoder layers";
    default: return "none";
  }
}

/** The config key that declares the MTP layers, as the target's config spells it. */
std::string mtp_key(const Json& config, const ModelInfo& info) {
  const Json& t = text_config(config);
  const char* k = t.is_object() && t.contains("mtp_num_hidden_layers") ? "mtp_num_hidden_layers"
                                                                        : "num_nextn_predict_layers";
  return info.wrapper ? fmt::format("text_config.{}", k) : std::string(k);
}

/** One MTP tensor of a checkpoint. */
struct MtpTensor {
  const TensorRef* ref = nullptr;
  std::int64_t layer = -1;  ///< MTP layer k (mtp.layers.k / layers.N+k), -1 for mtp.fc, norms, ...
  const Fp8Weight* fp8 = nullptr;  ///< an FP8 weight of an FP8 release: spliced as its bf16 expansion
  DType out_dtype() const { return fp8 != nullptr ? DType::BF16 : ref->info->dtype; }
  std::uint64_t out_bytes() const { return ref->info->numel() * (dtype_bits(out_dtype()) / 8); }
};

/** The MTP tensors of `ck` (classify's Role::MTP), with their MTP layer index. */
std::vector<MtpTensor> mtp_tensors_of(const Checkpoint& ck, const ModelInfo& info) {
  std::vector<MtpTensor> out;
  for (const auto& t : ck.tensors()) {
    const TensorClass c = classify(t.name, t.info->shape, info);
    if (c.role != Role::MTP) continue;
    MtpTensor m;
    m.ref = &t;
    if (c.layer >= 0) m.layer = info.mtp_form == MtpForm::EXTRA_LAYERS ? c.layer - info.num_layers : c.layer;
    out.push_back(m);
  }
  return out;
}

/** The fields whose values must agree between the target's and SRC's configs ("" when all do). */
std::string config_mismatch(const ModelInfo& t, const ModelInfo& s) {
  std::vector<std::string> bad;
  auto str = [&](std::string_view name, const std::string& a, const std::string& b) {
    if (a != b) bad.push_back(fmt::format("{} '{}' vs '{}'", name, a, b));
  };
  auto num = [&](std::string_view name, std::int64_t a, std::int64_t b) {
    if (a != b) bad.push_back(fmt::format("{} {} vs {}", name, a, b));
  };
  str("architecture", t.architecture, s.architecture);
  str("family", std::string(family_name(t.family)), std::string(family_name(s.family)));
  num("hidden_size", t.hidden_size, s.hidden_size);
  num("num_hidden_layers", t.num_layers, s.num_layers);
  num("vocab_size", t.vocab_size, s.vocab_size);
  num("num_attention_heads", t.num_heads, s.num_heads);
  num("num_key_value_heads", t.num_kv_heads, s.num_kv_heads);
  num("head_dim", t.head_dim, s.head_dim);
  num("intermediate_size", t.intermediate_size, s.intermediate_size);
  num("num_experts", t.num_experts, s.num_experts);
  num("moe_intermediate_size", t.moe_intermediate_size, s.moe_intermediate_size);
  num("shared_expert_intermediate_size", t.shared_expert_intermediate_size, s.shared_expert_intermediate_size);
  num("MTP layers", t.mtp_num_hidden_layers, s.mtp_num_hidden_layers);
  num("q_lora_rank", t.q_lora_rank, s.q_lora_rank);
  num("kv_lora_rank", t.kv_lora_rank, s.kv_lora_rank);
  num("qk_nope_head_dim", t.qk_nope_head_dim, s.qk_nope_head_dim);
  num("qk_rope_head_dim", t.qk_rope_head_dim, s.qk_rope_head_dim);
  num("v_head_dim", t.v_head_dim, s.v_head_dim);
  if (t.wrapper != s.wrapper) bad.push_back(fmt::format("layout {} vs {}", t.wrapper ? "wrapper" : "flat", s.wrapper ? "wrapper" : "flat"));
  return fmt::format("{}", fmt::join(bad, ", "));
}


/** True when `path` exists as a symbolic link (never followed). */
bool is_link(const stdfs::path& p) {
  std::error_code ec;
  return stdfs::is_symlink(stdfs::symlink_status(p, ec));
}

Error refuse(std::string message, const stdfs::path& file = {}) {
  return Error{Errc::BAD_INPUT, std::move(message), file.string(), {}};
}

/** Whether the file at `path` is exactly `layout` filled with the tensors' bytes from SRC (an FP8 weight's:
 * its bf16 expansion). */
Result<bool> same_shard(const stdfs::path& path, const st::ShardLayout& layout, const Checkpoint& src,
                        const Fp8Source* fp8) {
  FP4FORGE_ASSIGN_OR_RETURN(fs::File f, fs::File::open_read(path));
  FP4FORGE_ASSIGN_OR_RETURN(std::uint64_t size, f.size());
  if (size != layout.file_size) return false;
  std::string head(layout.header_bytes.size(), '\0');
  FP4FORGE_TRY(f.pread_all(std::as_writable_bytes(std::span<char>(head.data(), head.size())), 0));
  if (head != layout.header_bytes) return false;
  const std::uint64_t base = layout.header_bytes.size();
  std::vector<std::byte> buf(std::size_t{1} << 20);
  for (const auto& t : layout.tensors) {
    const TensorRef* ref = src.find(t.name);
    if (ref == nullptr) return false;
    std::vector<std::uint16_t> expanded;
    std::span<const std::byte> want = src.data(*ref);
    if (const Fp8Weight* w = fp8 ? fp8->find(t.name) : nullptr) {
      expanded.resize(static_cast<std::size_t>(ref->info->numel()));
      FP4FORGE_TRY(dequant_elements(src, *w, 0, expanded.size(), expanded.data()));
      want = std::as_bytes(std::span<const std::uint16_t>(expanded));
    }
    for (std::uint64_t off = 0; off < want.size(); off += buf.size()) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), want.size() - off));
      FP4FORGE_TRY(f.pread_all(std::span<std::byte>(buf.data(), n), base + t.begin + off));
      if (std::memcmp(buf.data(), want.data() + off, n) != 0) return false;
    }
  }
  return true;
}

/** An edited JSON file of the target: its path, old text (empty when created) and new text. */
struct JsonEdit {
  std::string file;
  bool existed = false;
  std::string before, after;
  bool changes() const { return !existed || before != after; }
};

/** The doctor shape / MTP errors of a checkpoint described by `config` and `tensors`. */
Result<std::vector<Finding>> shape_errors(const stdfs::path& dir, const Json& config,
                                          std::map<std::string, TensorMeta, std::less<>> tensors) {
  ShapeContext ctx;
  ctx.dir = dir;
  ctx.config = config;
  ctx.tensors = std::move(tensors);
  FP4FORGE_TRY(init_shape_context(ctx));
  FindingSink sink;
  check_config_shapes(ctx, sink);
  check_mtp(ctx, sink);
  std::vector<Finding> out;
  for (auto& f : sink.take())
    if (f.severity == Severity::ERROR || is_kind(f, finding_kind("mtp-declared-missing"))) out.push_back(std::move(f));
  return out;
}

/** What the splice will do, decided before anything is written. */
struct SplicePlan {
  std::vector<MtpTensor> mtp;  ///< SRC's tensors to copy (empty when nothing is copied)
  std::optional<st::ShardLayout> layout;
  bool adopt = false;          ///< a byte-identical leftover shard is reused
  bool replace_stray = false;  ///< an owned target's leftover shard is replaced
  std::optional<JsonEdit> config, index;
};


/** One splice: the two checkpoints, what the steps find and decide, and the report. The steps run in order;
 * nothing is written before write_splice. */
struct Splice {
  Splice(const stdfs::path& t, const stdfs::path& s, const MtpSpliceOptions& o) : target(t), source(s), opts(o) {}
  stdfs::path target, source;
  const MtpSpliceOptions& opts;
  MtpSpliceReport rep;
  std::optional<Checkpoint> tck, sck;
  std::optional<ModelInfo> ti, si;
  MtpForm form = MtpForm::NONE;
  std::string key;                  ///< the config key that declares the MTP layers
  std::optional<Fp8Source> sfp8;    ///< SRC read as an FP8 release, when it is one
  std::vector<MtpTensor> src_mtp;   ///< SRC's MTP tensors of the declared layers
  SplicePlan plan;
  std::string index_name;
  bool quantized = false;           ///< the target is quantized (its ignore list gets the MTP modules)
  std::string config_text, new_config_text;
};

/** Step 0: both checkpoints opened and their configs read (the target is not SRC itself). */
Status open_both(Splice& sp) {
  const stdfs::path& target = sp.target;
  const stdfs::path& source = sp.source;
  MtpSpliceReport& rep = sp.rep;
  {
    std::error_code ec;
    if (stdfs::equivalent(target, source, ec) && !ec)
      return make_error(Errc::USAGE, "--mtp-from '{}' is the target checkpoint itself; expected the original "
                                     "release the MTP tensors are copied from", source.string());
  }
  CheckpointOptions co;
  co.require_config = true;
  co.require_weights = true;
  FP4FORGE_ASSIGN_OR_RETURN(Checkpoint tck, Checkpoint::open(target, co));
  FP4FORGE_ASSIGN_OR_RETURN(Checkpoint sck, Checkpoint::open(source, co));
  sp.tck.emplace(std::move(tck));
  sp.sck.emplace(std::move(sck));
  auto tinfo_r = read_model_info(sp.tck->config());
  if (!tinfo_r) return with_file(tinfo_r.error(), (target / "config.json").string());
  auto sinfo_r = read_model_info(sp.sck->config());
  if (!sinfo_r) return with_file(sinfo_r.error(), (source / "config.json").string());
  sp.ti.emplace(std::move(tinfo_r).value());
  sp.si.emplace(std::move(sinfo_r).value());
  const ModelInfo& ti = *sp.ti;
  const MtpForm form = sp.form = ti.mtp_form;
  rep.family = std::string(family_name(ti.family));
  rep.form = std::string(form_name(form));
  rep.layers = ti.mtp_num_hidden_layers;
  sp.key = mtp_key(sp.tck->config(), ti);

  return {};
}

/** Steps 1-2: the target's family stores MTP and its config declares it; SRC is the same model. */
Status check_declared(const Splice& sp) {
  const stdfs::path& target = sp.target;
  const stdfs::path& source = sp.source;
  const ModelInfo& ti = *sp.ti;
  const ModelInfo& si = *sp.si;
  const MtpForm form = sp.form;
  const std::string& key = sp.key;
  // 1. The target stores and declares MTP.
  if (form == MtpForm::NONE)
    return refuse(fmt::format("{}: family {} ({}) has no MTP layers fp4forge can splice (the registry's MTP form "
                              "is none); expected Qwen3-Next, Qwen3.5/3.6, DeepSeek-V3 or GLM-4.5",
                              target.string(), family_name(ti.family),
                              ti.architecture.empty() ? "no architectures" : ti.architecture),
                  target / "config.json");
  if (ti.mtp_num_hidden_layers < 1)
    return refuse(fmt::format("{}: config.json declares no MTP layers ({} is 0 or absent); nothing to splice; hint: "
                              "the original release's config declares them, restore that key first",
                              target.string(), key),
                  target / "config.json");
  // 2. SRC is the same model.
  if (const std::string bad = config_mismatch(ti, si); !bad.empty())
    return refuse(fmt::format("--mtp-from '{}': its config.json describes a different model than the target's "
                              "({}; target vs source); expected the original release the target was made from",
                              source.string(), bad),
                  source / "config.json");
  return {};
}

/** Step 3: SRC's MTP tensors, present for every declared layer, unquantized or FP8 (an FP8 release is
 * spliced as its bf16 expansion, as quantize keeps it: model/fp8_source.h). */
Status collect_source_mtp(Splice& sp) {
  const stdfs::path& source = sp.source;
  MtpSpliceReport& rep = sp.rep;
  const Checkpoint& tck = *sp.tck;
  const Checkpoint& sck = *sp.sck;
  const ModelInfo& ti = *sp.ti;
  const ModelInfo& si = *sp.si;
  const MtpForm form = sp.form;
  const std::string& key = sp.key;
  // 3. SRC's MTP tensors: present, complete, unquantized or FP8 (an FP8 release is spliced as its bf16
  // expansion, as quantize keeps it: model/fp8_source.h).
  auto sfp8_r = read_fp8_source(sck);
  if (!sfp8_r) return with_file(sfp8_r.error(), source.string());
  sp.sfp8 = std::move(sfp8_r).value();
  const std::optional<Fp8Source>& sfp8 = sp.sfp8;
  std::vector<MtpTensor>& src_mtp = sp.src_mtp;
  std::vector<std::string> undeclared;
  for (auto m : mtp_tensors_of(sck, si)) {
    if (sfp8 && sfp8->consumed(m.ref->name)) continue;  // its scales, activation scales
    if (sfp8) m.fp8 = sfp8->find(m.ref->name);
    if (m.fp8 != nullptr && m.fp8->grid.payload != fp8::Payload::E4M3)
      return refuse(fmt::format("--mtp-from '{}': MTP tensor '{}' is a packed FP4 payload; fp4forge splices FP8 and "
                                "unquantized MTP weights; hint: splice from the release's bf16 expansion",
                                source.string(), m.ref->name));
    if (m.layer >= ti.mtp_num_hidden_layers || m.layer < -1) {
      undeclared.push_back(m.ref->name);
      continue;
    }
    src_mtp.push_back(m);
  }
  const std::string where = form == MtpForm::MTP_MODULE
                                ? std::string("mtp.* tensors")
                                : fmt::format("decoder layers {}layers.{}..{}", ti.text_prefix, ti.num_layers,
                                              ti.num_layers + ti.mtp_num_hidden_layers - 1);
  if (src_mtp.empty())
    return refuse(fmt::format("--mtp-from '{}' has no MTP tensors (expected {}); nothing to splice; hint: pass the "
                              "original release, not a copy re-saved by transformers",
                              source.string(), where),
                  source);
  for (std::int64_t k = 0; k < ti.mtp_num_hidden_layers; ++k) {
    const bool has = std::any_of(src_mtp.begin(), src_mtp.end(), [&](const MtpTensor& m) { return m.layer == k; });
    if (!has)
      return refuse(fmt::format("--mtp-from '{}': its MTP is incomplete: no tensors of MTP layer {} ({} declares {}); "
                                "expected every declared layer",
                                source.string(), k, key, ti.mtp_num_hidden_layers),
                    source);
  }
  for (const auto& m : src_mtp) {
    const TensorClass c = classify(m.ref->name, m.ref->info->shape, si);
    if (m.fp8 == nullptr && (c.quant_param || !is_source_dtype(m.ref->info->dtype)))
      return Error{Errc::BAD_INPUT,
                   fmt::format("--mtp-from '{}': MTP tensor '{}' is {} ({}); fp4forge splices unquantized MTP "
                               "(BF16, F16 or F32) or the E4M3 weights of an FP8 release only; hint: use a bf16 release of the model",
                               source.string(), m.ref->name, dtype_name(m.ref->info->dtype),
                               c.quant_param ? "a quantization parameter" : "not a floating-point weight dtype"),
                   source.string(), m.ref->name};
  }
  // The dtype the config declares (`dtype`, or transformers 4's `torch_dtype`) vs the copied tensors: vLLM
  // casts on load, so a difference is a note, not a refusal.
  {
    std::string declared;
    for (const Json* c : {&text_config(tck.config()), &tck.config()})
      for (const char* k : {"dtype", "torch_dtype"})
        if (declared.empty() && c->is_object() && c->contains(k) && (*c)[k].is_string()) declared = (*c)[k].get<std::string>();
    const std::map<std::string, DType> names{{"bfloat16", DType::BF16}, {"float16", DType::F16}, {"float32", DType::F32}};
    if (auto it = names.find(declared); it != names.end()) {
      std::size_t differ = 0;
      std::string example;
      for (const auto& m : src_mtp)
        if (m.out_dtype() != it->second && ++differ == 1) example = m.ref->name;
      if (differ)
        rep.warnings.push_back(fmt::format("{} MTP tensor(s) are not {} as config.json's dtype says (e.g. '{}', {}); "
                                           "copied as they are (vLLM casts on load)",
                                           differ, declared, example, dtype_name(sck.find(example)->info->dtype)));
    }
  }
  if (!undeclared.empty())
    rep.warnings.push_back(fmt::format("{} MTP tensor(s) of SRC belong to layers {} does not declare and are not "
                                       "copied (e.g. {})",
                                       undeclared.size(), key, undeclared.front()));

  return {};
}

/** Step 4: the target's own MTP decides the status: already present, a complete MTP of its own (nothing to
 * do: true), nothing yet (splice), or part of one (refused). */
Result<bool> decide_status(Splice& sp) {
  const stdfs::path& target = sp.target;
  const stdfs::path& source = sp.source;
  MtpSpliceReport& rep = sp.rep;
  const Checkpoint& tck = *sp.tck;
  const Checkpoint& sck = *sp.sck;
  const ModelInfo& ti = *sp.ti;
  const std::optional<Fp8Source>& sfp8 = sp.sfp8;
  const std::vector<MtpTensor>& src_mtp = sp.src_mtp;
  SplicePlan& plan = sp.plan;
  // 4. The target's own MTP.
  std::set<std::string> src_names;
  for (const auto& m : src_mtp) src_names.insert(m.ref->name);
  const auto tgt_mtp = mtp_tensors_of(tck, ti);
  std::size_t shared = 0;
  std::vector<std::string> foreign;
  for (const auto& m : tgt_mtp) {
    if (src_names.count(m.ref->name)) {
      const TensorRef* s = sck.find(m.ref->name);
      const DType sd = sfp8 && sfp8->find(s->name) ? DType::BF16 : s->info->dtype;  // as spliced
      if (sd != m.ref->info->dtype || s->info->shape != m.ref->info->shape)
        return refuse(fmt::format("{}: MTP tensor '{}' is {} {} in the target but {} {} in --mtp-from '{}'; "
                                  "refusing to mix them; hint: remove the target's MTP tensors or pass the release "
                                  "the target was made from",
                                  target.string(), m.ref->name, dtype_name(m.ref->info->dtype),
                                  format_shape(m.ref->info->shape), dtype_name(sd),
                                  format_shape(s->info->shape), source.string()),
                      target);
      ++shared;
    } else if (m.layer < ti.mtp_num_hidden_layers) {
      foreign.push_back(m.ref->name);
    }
  }
  bool target_complete = true;
  for (std::int64_t k = 0; k < ti.mtp_num_hidden_layers; ++k)
    target_complete = target_complete &&
                      std::any_of(tgt_mtp.begin(), tgt_mtp.end(), [&](const MtpTensor& m) { return m.layer == k; });
  if (shared == src_mtp.size() && foreign.empty()) {
    rep.status = "already-present";
  } else if (shared == 0 && target_complete && !foreign.empty()) {
    rep.status = "own-mtp-present";
    rep.message = fmt::format("nothing to splice: the target already has a complete MTP of its own ({} tensors, "
                              "not SRC's names); left as it is",
                              foreign.size());
    return true;
  } else if (shared == 0 && foreign.empty()) {
    rep.status = "spliced";
    plan.mtp = src_mtp;
  } else {
    return refuse(fmt::format("{}: the target holds part of an MTP ({} of SRC's {} MTP tensors, {} other MTP "
                              "tensors{}); refusing to complete a partial MTP; hint: remove the target's MTP "
                              "tensors (and their index entries) and splice again",
                              target.string(), shared, src_mtp.size(), foreign.size(),
                              foreign.empty() ? std::string() : fmt::format(", e.g. {}", foreign.front())),
                  target);
  }

  return false;
}

/** Step 5: where the MTP tensors live: a new shard (laid out now; a byte-identical leftover is adopted, an
 * owned target's stray one replaced), or the shard(s) already holding them. */
Status plan_shard(Splice& run) {
  const stdfs::path& target = run.target;
  MtpSpliceReport& rep = run.rep;
  const Checkpoint& tck = *run.tck;
  const Checkpoint& sck = *run.sck;
  const MtpSpliceOptions& opts = run.opts;
  const std::optional<Fp8Source>& sfp8 = run.sfp8;
  const std::vector<MtpTensor>& src_mtp = run.src_mtp;
  SplicePlan& plan = run.plan;
  // 5. Where the MTP tensors live: a new shard, or the shard(s) already holding them.
  run.index_name = tck.index_file().value_or(kDefaultIndex);
  const std::string& index_name = run.index_name;
  if (!plan.mtp.empty()) {
    rep.shard = kMtpShardName;
    for (const auto& n : tck.shard_names())
      if (n == rep.shard)
        return refuse(fmt::format("{}: the target already has a shard named '{}' that holds no MTP tensor; refusing "
                                  "to replace it",
                                  target.string(), rep.shard),
                      target / rep.shard);
    std::vector<st::OutTensor> outs;
    std::set<std::string> dts;
    for (const auto& m : plan.mtp) {
      outs.push_back({m.ref->name, m.out_dtype(), m.ref->info->shape});
      rep.bytes += m.out_bytes();
      dts.insert(std::string(dtype_name(m.out_dtype())));
    }
    rep.dtypes.assign(dts.begin(), dts.end());
    rep.tensors = plan.mtp.size();
    // The SRC shard's __metadata__ (transformers: {"format": "pt"}) when every MTP tensor comes from shards
    // that agree on it, else {"format": "pt"}.
    std::optional<std::vector<std::pair<std::string, std::string>>> md;
    bool agree = true;
    for (const auto& m : plan.mtp) {
      const auto& h = sck.shards()[m.ref->shard].header().metadata;
      if (!md) md = h;
      else if (*md != h) agree = false;
    }
    FP4FORGE_ASSIGN_OR_RETURN(
        st::ShardLayout layout,
        st::layout_shard(std::move(outs), agree && md ? *md : std::vector<std::pair<std::string, std::string>>{{"format", "pt"}}));
    rep.shard_bytes = layout.file_size;
    const stdfs::path sp = target / rep.shard;
    std::error_code ec;
    const auto st = stdfs::symlink_status(sp, ec);
    if (stdfs::is_symlink(st))
      return refuse(fmt::format("refusing to write '{}': it is a symbolic link; fp4forge never writes through links; "
                                "hint: remove the link",
                                sp.string()),
                    sp);
    if (stdfs::exists(st)) {
      if (!stdfs::is_regular_file(st))
        return refuse(fmt::format("refusing to write '{}': it exists and is not a regular file", sp.string()), sp);
      FP4FORGE_ASSIGN_OR_RETURN(const bool same, same_shard(sp, layout, sck, sfp8 ? &*sfp8 : nullptr));
      if (same) {
        plan.adopt = true;
      } else if (opts.owned_target) {
        plan.replace_stray = true;
      } else {
        return refuse(fmt::format("{}: '{}' exists but is not part of the checkpoint (not in {}) and is not the shard "
                                  "the splice writes; refusing to replace it; hint: move it away and run again",
                                  target.string(), rep.shard, index_name),
                      sp);
      }
    }
    plan.layout = std::move(layout);
  } else {
    std::set<std::string> shards;
    for (const auto& m : src_mtp) shards.insert(tck.shard_names()[tck.find(m.ref->name)->shard]);
    rep.shard = fmt::format("{}", fmt::join(shards, ", "));
  }

  return {};
}

/** Step 6: a quantized target's quantization_config.ignore gains the MTP modules (quantize's planner on the
 * MTP tensors decides the entries). */
Status plan_ignore(Splice& sp) {
  const stdfs::path& target = sp.target;
  MtpSpliceReport& rep = sp.rep;
  const Checkpoint& tck = *sp.tck;
  const std::vector<MtpTensor>& src_mtp = sp.src_mtp;
  SplicePlan& plan = sp.plan;
  // 6. quantization_config.ignore for a quantized target: quantize's planner on the MTP tensors.
  std::string qkey = "quantization_config";
  std::vector<std::string> qpath;
  const Json* qj = find_quant_config(tck.config(), &qkey, &qpath);
  bool& quantized = sp.quantized;
  quantized = qj != nullptr;
  for (const auto& t : tck.tensors())
    quantized = quantized || (t.name.size() > 14 && t.name.compare(t.name.size() - 14, 14, ".weight_packed") == 0);
  std::string& config_text = sp.config_text;
  FP4FORGE_ASSIGN_OR_RETURN(config_text, fs::read_file(target / "config.json"));
  std::string& new_config_text = sp.new_config_text;
  new_config_text = config_text;
  if (quantized) {
    if (qj == nullptr)
      return refuse(fmt::format("{}: the target has packed weights but config.json has no quantization_config; "
                                "cannot list the MTP modules in its ignore",
                                target.string()),
                    target / "config.json");
    FP4FORGE_ASSIGN_OR_RETURN(QuantConfig qc, parse_quant_config(*qj, qkey));
    if (qc.quant_method != "compressed-tensors")
      return refuse(fmt::format("{}: {}.quant_method is '{}'; the splice adds the MTP modules to a compressed-tensors "
                                "ignore list only; expected 'compressed-tensors'",
                                target.string(), qkey, qc.quant_method),
                    target / "config.json");
    quant::PlanInput in;
    in.config = expanded_config(tck.config());
    in.shard_names = {kMtpShardName};
    for (const auto& m : src_mtp) in.tensors.push_back({m.ref->name, 0, m.out_dtype(), m.ref->info->shape});
    quant::PlanOptions mopts;
    mopts.allow_nothing_quantized = true;  // the MTP block alone: its ignore entries, never a write
    auto mplan = quant::make_plan(in, mopts);
    if (!mplan)
      return Error{Errc::INTERNAL,
                   fmt::format("cannot compute the ignore entries of the MTP tensors: {}", mplan.error().message),
                   target.string(), {}};
    std::set<std::string> have(qc.ignore.begin(), qc.ignore.end());
    for (const auto& e : mplan->ignore)
      if (!have.count(e)) rep.ignore_added.push_back(e);
    if (!rep.ignore_added.empty()) {
      std::vector<std::string> merged = qc.ignore;
      const bool sorted = std::is_sorted(merged.begin(), merged.end());
      merged.insert(merged.end(), rep.ignore_added.begin(), rep.ignore_added.end());
      if (sorted) std::sort(merged.begin(), merged.end());
      FP4FORGE_ASSIGN_OR_RETURN(JsonDocument doc, JsonDocument::parse(config_text, "config.json"));
      qpath.push_back("ignore");
      FP4FORGE_TRY(doc.set(qpath, Json(merged)));
      new_config_text = doc.dump();
    }
  }
  if (new_config_text != config_text) plan.config = JsonEdit{"config.json", true, config_text, new_config_text};

  return {};
}

/** Step 7: the index gains the new shard's tensors and total_size (total_parameters when present), or is
 * created as quantize writes one. */
Status plan_index(Splice& sp) {
  const stdfs::path& target = sp.target;
  MtpSpliceReport& rep = sp.rep;
  const Checkpoint& tck = *sp.tck;
  const std::string& index_name = sp.index_name;
  SplicePlan& plan = sp.plan;
  // 7. The index: the new shard's tensors, total_size (and total_parameters when present).
  if (!plan.mtp.empty()) {
    std::uint64_t params = 0;
    for (const auto& m : plan.mtp) params += st::shape_numel(m.ref->info->shape);
    const std::uint64_t total = tck.total_tensor_bytes() + rep.bytes;
    if (tck.index_file()) {
      FP4FORGE_ASSIGN_OR_RETURN(std::string text, fs::read_file(target / index_name));
      FP4FORGE_ASSIGN_OR_RETURN(JsonDocument doc, JsonDocument::parse(text, index_name));
      for (const auto& m : plan.mtp) FP4FORGE_TRY(doc.set({"weight_map", m.ref->name}, rep.shard));
      if (auto md = doc.get({"metadata"}); md && md->is_object()) {
        FP4FORGE_TRY(doc.set({"metadata", "total_size"}, total));
        if (auto tp = doc.get({"metadata", "total_parameters"}); tp && tp->is_number_unsigned())
          FP4FORGE_TRY(doc.set({"metadata", "total_parameters"}, tp->get<std::uint64_t>() + params));
      }
      plan.index = JsonEdit{index_name, true, text, doc.dump()};
    } else {
      // As quantize writes an index (model_free's form): metadata.total_size, sorted weight_map, indent 2.
      nlohmann::json wm = nlohmann::json::object();
      for (const auto& t : tck.tensors()) wm[t.name] = tck.shard_names()[t.shard];
      for (const auto& m : plan.mtp) wm[m.ref->name] = rep.shard;
      plan.index = JsonEdit{index_name, false, {}, st::index_text(wm, total)};
      rep.index_created = true;
    }
  }

  return {};
}

/** Step 8: doctor's shape checks on the checkpoint as the splice would leave it: no new error. */
Status check_after(const Splice& sp) {
  const stdfs::path& target = sp.target;
  const stdfs::path& source = sp.source;
  const Checkpoint& tck = *sp.tck;
  const SplicePlan& plan = sp.plan;
  const std::string& new_config_text = sp.new_config_text;
  // 8. doctor's shape checks on the checkpoint as the splice leaves it.
  if (!plan.mtp.empty() || plan.config) {
    std::map<std::string, TensorMeta, std::less<>> before = tensor_metas(tck);
    std::map<std::string, TensorMeta, std::less<>> after = before;
    for (const auto& m : plan.mtp)
      after.emplace(m.ref->name, TensorMeta{std::string(dtype_name(m.out_dtype())), m.ref->info->shape});
    FP4FORGE_ASSIGN_OR_RETURN(Json new_config, parse_json_bounded(new_config_text, "config.json"));
    FP4FORGE_ASSIGN_OR_RETURN(auto old_findings, shape_errors(target, tck.config(), std::move(before)));
    FP4FORGE_ASSIGN_OR_RETURN(auto new_findings, shape_errors(target, new_config, std::move(after)));
    for (const auto& f : new_findings) {
      const bool old = std::any_of(old_findings.begin(), old_findings.end(), [&](const Finding& o) {
        return o.kind == f.kind && o.message == f.message;
      });
      if (old) continue;
      return refuse(fmt::format("splicing the MTP of --mtp-from '{}' into {} would leave a {} finding: {}; nothing "
                                "written; hint: SRC is not the release the target was made from, or its MTP "
                                "tensors are damaged",
                                source.string(), target.string(), f.kind, f.message),
                    source);
    }
  }

  return {};
}

/** Step 10: the changes written, backups first; every step undone when a later one fails. */
Status write_splice(Splice& sp, std::optional<FileChange>& cfg_change, std::optional<FileChange>& shard_change,
                    std::optional<FileChange>& idx_change) {
  const stdfs::path& target = sp.target;
  MtpSpliceReport& rep = sp.rep;
  const Checkpoint& sck = *sp.sck;
  const MtpSpliceOptions& opts = sp.opts;
  SplicePlan& plan = sp.plan;
  // 10. Write: backups first.
  // Every step is undone when a later one fails (a step that failed may have happened all the same, e.g. a
  // rename followed by a failed fsync of the folder): config.json and the index get their original bytes
  // back, a created index and the new shard are removed, and then the backups, which are not needed any
  // more. What cannot be restored is reported, and the backups stay.
  const std::string stamp = opts.timestamp.empty() ? backup::stamp_now() : opts.timestamp;
  std::vector<stdfs::path> backups;
  std::optional<st::ShardWriter> writer;
  bool cfg_touched = false, shard_touched = false, idx_touched = false;
  auto undo = [&](Error e) -> Error {
    std::vector<std::string> left;
    if (idx_touched) {
      const stdfs::path p = target / plan.index->file;
      if (!(plan.index->existed ? fs::edit_file_atomic(p, plan.index->before) : fs::remove_tree(p)))
        left.push_back(plan.index->file);
    }
    if (shard_touched && !fs::remove_tree(target / rep.shard)) left.push_back(rep.shard);
    if (writer) writer->abort();
    if (cfg_touched && !fs::edit_file_atomic(target / "config.json", plan.config->before)) left.push_back("config.json");
    if (left.empty()) {
      for (const auto& b : backups) (void)fs::remove_tree(b);
    } else {
      e.message += fmt::format(" (and could not undo the change of {}: restore {} from the backups)",
                               fmt::join(left, ", "), left.size() == 1 ? "it" : "them");
    }
    return e;
  };
  // The caller holds the target's edit lock (doctor --fix: the folder; quantize: its staging folder), so a
  // temporary of config.json or the index (or of their backups) is a killed run's (R4-B16).
  for (const auto* e : {&plan.config, &plan.index})
    if (*e)
      if (auto removed = backup::remove_stale_temporaries(target / (*e)->file); !removed) return std::move(removed).error();
  if (!opts.owned_target) {
    for (auto [e, c] : {std::pair{&plan.config, &cfg_change}, std::pair{&plan.index, &idx_change}}) {
      if (!*e || !(*e)->existed) continue;
      auto bak = backup::write_backup(target / (*e)->file, (*e)->before, backup::kBackupInfix, stamp);
      if (!bak) return undo(std::move(bak).error());
      backups.push_back(*bak);
      (*c)->backup = bak->filename().string();
    }
  }
  if (plan.layout && !plan.adopt) {
    if (plan.replace_stray)
      if (Status st = fs::remove_tree(target / rep.shard); !st) return undo(std::move(st).error());
    auto w = st::ShardWriter::create(target / rep.shard, *plan.layout);
    if (!w) return undo(std::move(w).error());
    writer.emplace(std::move(*w));
    for (const auto& m : plan.mtp) {
      const st::TensorInfo* out_t = writer->layout().find(m.ref->name);
      FP4FORGE_CHECK(out_t != nullptr);
      if (m.fp8 != nullptr) {
        std::vector<std::uint16_t> bf(static_cast<std::size_t>(m.ref->info->numel()));
        if (Status st = dequant_elements(sck, *m.fp8, 0, bf.size(), bf.data()); !st) return undo(std::move(st).error());
        if (Status st = writer->write_tensor(*out_t, std::as_bytes(std::span<const std::uint16_t>(bf))); !st)
          return undo(std::move(st).error());
        continue;
      }
      if (Status st = writer->write_tensor(*out_t, sck.data(*m.ref)); !st) return undo(std::move(st).error());
    }
    // The copy read what SRC holds (a SRC shard truncated meanwhile reads as zeros).
    if (Status st = sck.check_unchanged(); !st) return undo(std::move(st).error());
  }
  // config.json, then the shard's rename, then the index (the commit point).
  if (plan.config) {
    cfg_touched = true;
    if (Status st = fs::edit_file_atomic(target / "config.json", plan.config->after); !st)
      return undo(std::move(st).error());
    cfg_change->written = true;
  }
  if (writer) {
    shard_touched = true;
    if (Status st = writer->commit(); !st) return undo(std::move(st).error());
    shard_change->written = true;
  }
  if (plan.index) {
    idx_touched = true;
    if (Status st = fs::edit_file_atomic(target / plan.index->file, plan.index->after); !st)
      return undo(std::move(st).error());
    idx_change->written = true;
  }
  return {};
}

}  // namespace

Result<MtpSpliceReport> splice_mtp(const stdfs::path& target, const stdfs::path& source,
                                   const MtpSpliceOptions& opts) {
  Splice sp(target, source, opts);
  MtpSpliceReport& rep = sp.rep;
  rep.target = target.string();
  rep.source = source.string();
  rep.dry_run = opts.dry_run;
  FP4FORGE_TRY(open_both(sp));
  FP4FORGE_TRY(check_declared(sp));
  FP4FORGE_TRY(collect_source_mtp(sp));
  FP4FORGE_ASSIGN_OR_RETURN(const bool done, decide_status(sp));
  if (done) return rep;
  FP4FORGE_TRY(plan_shard(sp));
  FP4FORGE_TRY(plan_ignore(sp));
  FP4FORGE_TRY(plan_index(sp));
  FP4FORGE_TRY(check_after(sp));
  const SplicePlan& plan = sp.plan;
  const std::vector<MtpTensor>& src_mtp = sp.src_mtp;
  const bool quantized = sp.quantized;
  // 9. What changes, in write order: config.json, the shard, the index.
  if (plan.mtp.empty() && !plan.config) {
    rep.message = fmt::format("nothing to splice: the target already holds the {} MTP tensors of SRC (same names, "
                              "dtypes and shapes, in {}){}",
                              src_mtp.size(), rep.shard,
                              quantized ? " and lists their modules in quantization_config.ignore" : "");
    return rep;
  }
  if (plan.mtp.empty()) rep.status = "completed";
  auto change_of = [&](const JsonEdit& e) {
    FileChange c;
    c.file = e.file;
    c.kinds = {kFixKind};
    c.created = !e.existed;
    c.diff = util::unified_diff(e.existed ? e.before : std::string(), e.after, e.existed ? "a/" + e.file : "/dev/null",
                                "b/" + e.file);
    return c;
  };
  std::optional<FileChange> cfg_change, shard_change, idx_change;
  if (plan.config) cfg_change = change_of(*plan.config);
  if (plan.layout && !plan.adopt) {
    FileChange c;
    c.file = rep.shard;
    c.kinds = {kFixKind};
    c.created = true;
    shard_change = c;
  }
  if (plan.index) idx_change = change_of(*plan.index);
  auto finish_report = [&]() {
    for (auto* c : {&cfg_change, &shard_change, &idx_change})
      if (*c) rep.changes.push_back(**c);
    const std::string what =
        plan.mtp.empty()
            ? fmt::format("the {} MTP tensors were already there; added {} ignore entr{}", src_mtp.size(),
                          rep.ignore_added.size(), rep.ignore_added.size() == 1 ? "y" : "ies")
            : fmt::format("{} {} MTP tensor(s) ({}, {}) from {} into {}{}{}", opts.dry_run ? "would splice" : "spliced",
                          rep.tensors, format_bytes(rep.bytes), fmt::join(rep.dtypes, "/"), source.string(), rep.shard,
                          plan.adopt ? " (a byte-identical leftover shard was reused)" : "",
                          rep.ignore_added.empty() ? std::string()
                                                   : fmt::format(", {} ignore entr{} added", rep.ignore_added.size(),
                                                                 rep.ignore_added.size() == 1 ? "y" : "ies"));
    rep.message = what;
  };
  // Links are refused (in a dry run too) before the first byte is written.
  for (const auto* e : {&plan.config, &plan.index}) {
    if (!*e) continue;
    const stdfs::path p = target / (*e)->file;
    if (is_link(p))
      return refuse(fmt::format("refusing to replace '{}': it is a symbolic link; fp4forge never writes through "
                                "links (a Hugging Face cache snapshot links every file); hint: copy the checkpoint "
                                "to a folder of regular files and splice there",
                                p.string()),
                    p);
  }
  rep.shard_adopted = plan.adopt;
  if (opts.dry_run) {
    finish_report();
    return rep;
  }

  FP4FORGE_TRY(write_splice(sp, cfg_change, shard_change, idx_change));
  finish_report();
  return rep;
}

nlohmann::ordered_json to_json(const MtpSpliceReport& r) {
  nlohmann::ordered_json j;
  j["target"] = r.target;
  j["source"] = r.source;
  j["family"] = r.family;
  j["form"] = r.form;
  j["layers"] = r.layers;
  j["status"] = r.status;
  j["dry_run"] = r.dry_run;
  j["shard"] = r.shard.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.shard);
  j["tensors"] = r.tensors;
  j["bytes"] = r.bytes;
  j["shard_bytes"] = r.shard_bytes;
  j["shard_adopted"] = r.shard_adopted;
  j["dtypes"] = r.dtypes;
  j["ignore_added"] = r.ignore_added;
  j["index_created"] = r.index_created;
  nlohmann::ordered_json backups = nlohmann::ordered_json::array();
  for (const auto& c : r.changes)
    if (!c.backup.empty()) backups.push_back(c.backup);
  j["backups"] = std::move(backups);
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const auto& c : r.changes) files.push_back(c.file);
  j["files"] = std::move(files);
  j["warnings"] = r.warnings;
  j["message"] = r.message;
  return j;
}

std::string to_text(const MtpSpliceReport& r) {
  const auto esc = [](std::string_view x) { return util::printable(x, util::kReportLine); };  // R4-B5
  std::string s = fmt::format("mtp splice ({}, {} MTP layer(s), {}): {}\n", r.family, r.layers, r.form, esc(r.message));
  if (!r.ignore_added.empty()) {
    std::vector<std::string> shown;
    for (std::size_t i = 0; i < std::min<std::size_t>(r.ignore_added.size(), 5); ++i) shown.push_back(esc(r.ignore_added[i]));
    s += fmt::format("  ignore += {}{}\n", fmt::join(shown, ", "),
                     r.ignore_added.size() > shown.size() ? fmt::format(", ... ({} in all)", r.ignore_added.size()) : "");
  }
  if (r.index_created) s += "  created the index\n";
  for (const auto& c : r.changes)
    if (!c.backup.empty()) s += fmt::format("  backup: {}\n", esc(c.backup));
  for (const auto& w : r.warnings) s += fmt::format("  warning: {}\n", esc(w));
  return s;
}

}  // namespace fp4forge::quant
