#include "fp4forge/kvplan/compose.h"

#include <system_error>

#include <yaml-cpp/yaml.h>

#include "fp4forge/kvplan/report.h"
#include "fp4forge/util/size.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/hf_cache.h"
#include "fp4forge/util/strings.h"
#include "fp4forge/util/yaml_scalar.h"

namespace fp4forge::kvplan {
namespace {

/** A seat with a vision tower served with images (mm on): its LiteLLM entry says supports_vision, and the probe that
 * proves it needs --multimodal (a rejected image fails it, as gateway's gate for that entry does). */
bool serves_images(const SeatModel& m) { return m.arg.mm && m.info.has_vision_config; }

constexpr int kContainerPort = 8000;

std::string absolute_dir(const std::filesystem::path& p) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(p, ec);
  if (ec) return p.string();
  return abs.lexically_normal().string();
}

/** The host folder mounted at /models/<seat>, and the path vLLM loads inside the container. A Hugging
 * Face cache snapshot's files are links to ../../blobs/<hash>: mounting the snapshot alone would leave them
 * dangling in the container, so its whole repository folder is mounted and vLLM pointed at the snapshot. */
struct ModelMount {
  std::string host, container, model;
};
ModelMount model_mount(const SeatArg& a) {
  const std::string container = "/models/" + a.name;
  if (const auto repo = hf_cache::snapshot_repo_dir(a.dir)) {
    std::error_code ec;
    std::filesystem::path snap = std::filesystem::weakly_canonical(std::filesystem::absolute(a.dir, ec), ec);
    if (snap.filename().empty()) snap = snap.parent_path();
    return {repo->string(), container, container + "/snapshots/" + snap.filename().string()};
  }
  return {absolute_dir(a.dir), container, container};
}

/** A string scalar: plain when no YAML 1.1 / 1.2 reader retypes it, else double-quoted (util/yaml_scalar.h). */
struct Str {
  std::string_view v;
};
YAML::Emitter& operator<<(YAML::Emitter& e, Str s) {
  if (util::yaml_plain_safe(s.v)) return e << std::string(s.v);
  return e << YAML::DoubleQuoted << std::string(s.v);
}

/** vLLM's spelling of a mamba state dtype. */
}  // namespace

std::string seat_image(const Plan& plan, std::size_t seat, const ComposeOptions& opts) {
  if (!opts.image.empty()) return opts.image;
  return opts.image_repo + ":" + vllm_image_tag(plan.seats[seat].rules);
}

bool loopback_host(std::string_view host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string h = util::ascii_lower(host);
  return h == "localhost" || h.ends_with(".localhost") || h == "::1" || h.starts_with("127.");
}

std::string compose_project_name(std::string_view seat) {
  std::string out = "fp4forge-";
  for (char c : seat) {
    const char l = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    out.push_back((l >= 'a' && l <= 'z') || (l >= '0' && l <= '9') || l == '_' || l == '-' ? l : '-');
  }
  return out;
}

std::vector<std::string> vllm_args(const Plan& plan, std::size_t seat) {
  const SeatModel& m = plan.seats[seat];
  const SeatPlacement& p = plan.placements[seat];
  const SeatArg& a = m.arg;
  std::vector<std::string> v = {"--model", model_mount(a).model, "--served-model-name", a.served_name,
                                "--host", "0.0.0.0", "--port", std::to_string(kContainerPort)};
  v.insert(v.end(), {"--gpu-memory-utilization", format_util(p.util), "--max-model-len",
                     std::to_string(m.max_model_len), "--kv-cache-dtype", std::string(kv_cache_dtype_name(a.kv.kv_cache_dtype)),
                     "--max-num-batched-tokens", std::to_string(p.max_num_batched_tokens),
                     "--tensor-parallel-size", std::to_string(a.kv.tp), "--max-num-seqs",
                     std::to_string(p.max_num_seqs)});
  if (a.kv.dtype != ModelDtype::AUTO) v.insert(v.end(), {"--dtype", std::string(model_dtype_name(a.kv.dtype))});
  if (a.enforce_eager) v.push_back("--enforce-eager");
  v.push_back(a.kv.prefix_caching ? "--enable-prefix-caching" : "--no-enable-prefix-caching");
  if (a.kv.spec_tokens > 0) {
    v.push_back("--speculative-config");
    v.push_back(fmt::format("{{\"method\":\"mtp\",\"num_speculative_tokens\":{}}}", a.kv.spec_tokens));
  }
  if (!a.mm && (m.info.has_vision_config || m.info.has_audio_config)) {
    v.push_back("--limit-mm-per-prompt");
    v.push_back(m.info.has_audio_config ? "{\"image\":0,\"video\":0,\"audio\":0}" : "{\"image\":0,\"video\":0}");
  }
  if (a.kv.block_size > 0) v.insert(v.end(), {"--block-size", std::to_string(a.kv.block_size)});
  if (a.kv.mamba_ssm_cache_dtype != StateDtype::AUTO)
    v.insert(v.end(), {"--mamba-ssm-cache-dtype", std::string(state_dtype_name(a.kv.mamba_ssm_cache_dtype))});
  if (a.kv.mamba_cache_dtype != StateDtype::AUTO)
    v.insert(v.end(), {"--mamba-cache-dtype", std::string(state_dtype_name(a.kv.mamba_cache_dtype))});
  if (!a.kv.hybrid_kv_cache_manager) v.push_back("--disable-hybrid-kv-cache-manager");
  // The key from the host's environment when compose starts the stack (compose interpolates ${VAR:?err} in every
  // value and refuses to start without it): never written here.
  if (!a.api_key_env.empty())
    v.insert(v.end(),
             {"--api-key", fmt::format("${{{}:?set {} to the seat's API key}}", a.api_key_env, a.api_key_env)});
  // Parsers (the family's, chosen by the chat template and the planned version) and the seat's vllm_args.
  for (auto& w : serving_args(m.serving)) v.push_back(std::move(w));
  return v;
}

std::string compose_yaml(const Plan& plan, std::size_t seat, const ComposeOptions& opts) {
  const SeatModel& m = plan.seats[seat];
  const SeatPlacement& p = plan.placements[seat];
  const SeatArg& a = m.arg;
  std::vector<std::string> device_ids;
  for (std::size_t g : p.gpus) device_ids.push_back(plan.gpus[g].gpu.id);
  YAML::Emitter e;
  e << YAML::Comment(fmt::format(
      "generated by fp4forge plan: seat {} on GPU {}; KV memory {} ({} blocks, {:.2f}x concurrency at {} tokens)",
      a.name, fmt::join(device_ids, "+"), format_bytes(p.available_kv_bytes), p.num_blocks, p.max_concurrency,
      m.max_model_len));
  // The probe that proves this stack, as written (issue 55 tryout F: a stack without tools was written beside a note
  // that probe would fail it).
  e << YAML::Newline
    << YAML::Comment(fmt::format("prove it before traffic: fp4forge probe http://localhost:{} --model {}{}{}{}",
                                 host_port(a, seat), a.served_name,
                                 a.api_key_env.empty() ? "" : " --api-key-env " + a.api_key_env,
                                 // The gate gateway applies to the supports_vision entry below (tryout N-M2).
                                 serves_images(m) ? " --multimodal" : "",
                                 serves_tools(m.serving) ? ""
                                                         : " --no-tools (the stack passes no tool-call parser: "
                                                           "the seat serves no tools)"));
  // The KV pool is not part of that proof: plan's figure is an estimate, which the seat's own pool may miss by more
  // than the kv check's 2 % (tryout S-M3: said nowhere that the header's probe does not check it). The comparison
  // is its own line, with what a difference means.
  e << YAML::Newline
    << YAML::Comment(fmt::format(
           "the probe above does not compare the KV pool with this plan; to compare: fp4forge probe "
           "http://localhost:{} "
           "--model {}{} --checks kv --expect-kv-tokens {} (num_blocks {} x block {}; over 2 % off: not the seat "
           "planned, or the estimate is: plan log=THE_SEATS_LOG learns the seat's own figures)",
           host_port(a, seat), a.served_name, a.api_key_env.empty() ? "" : " --api-key-env " + a.api_key_env,
           static_cast<std::uint64_t>(p.num_blocks) * static_cast<std::uint64_t>(m.layout.attn_block_size),
           p.num_blocks, m.layout.attn_block_size));
  e << YAML::Newline;
  e << YAML::BeginMap;
  e << YAML::Key << "name" << YAML::Value << Str{compose_project_name(a.name)};
  e << YAML::Key << "services" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << Str{a.name} << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "image" << YAML::Value << Str{seat_image(plan, seat, opts)};
  e << YAML::Key << "container_name" << YAML::Value << Str{"vllm-" + a.name};
  e << YAML::Key << "restart" << YAML::Value << "unless-stopped";
  e << YAML::Key << "ipc" << YAML::Value << "host";
  e << YAML::Key << "ports" << YAML::Value << YAML::BeginSeq
    << Str{fmt::format("{}:{}", host_port(plan.seats[seat].arg, seat), kContainerPort)} << YAML::EndSeq;
  e << YAML::Key << "volumes" << YAML::Value << YAML::BeginSeq
    << Str{model_mount(a).host + ":" + model_mount(a).container + ":ro"} << YAML::EndSeq;
  e << YAML::Key << "environment" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "HF_HUB_OFFLINE" << YAML::Value << YAML::DoubleQuoted << "1";
  if (a.allow_long_max_model_len)  // vllm/envs.py: max_model_len above the model's limit is a warning, not an error
    e << YAML::Key << "VLLM_ALLOW_LONG_MAX_MODEL_LEN" << YAML::Value << YAML::DoubleQuoted << "1";
  e << YAML::EndMap;
  e << YAML::Key << "command" << YAML::Value << YAML::BeginSeq;
  for (const auto& arg : vllm_args(plan, seat)) e << YAML::DoubleQuoted << arg;
  e << YAML::EndSeq;
  e << YAML::Key << "deploy" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "resources" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "reservations" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "devices" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  e << YAML::Key << "driver" << YAML::Value << "nvidia";
  e << YAML::Key << "device_ids" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const auto& id : device_ids) e << YAML::DoubleQuoted << id;
  e << YAML::EndSeq;
  e << YAML::Key << "capabilities" << YAML::Value << YAML::Flow << YAML::BeginSeq << "gpu" << YAML::EndSeq;
  e << YAML::EndMap << YAML::EndSeq;  // devices
  e << YAML::EndMap << YAML::EndMap << YAML::EndMap;  // reservations, resources, deploy
  e << YAML::Key << "healthcheck" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "test" << YAML::Value << YAML::Flow << YAML::BeginSeq << "CMD" << "python3" << "-c"
    << YAML::DoubleQuoted
    << fmt::format("import urllib.request; urllib.request.urlopen('http://localhost:{}/health', timeout=5)",
                   kContainerPort)
    << YAML::EndSeq;
  e << YAML::Key << "interval" << YAML::Value << "30s";
  e << YAML::Key << "timeout" << YAML::Value << "10s";
  e << YAML::Key << "retries" << YAML::Value << 3;
  e << YAML::Key << "start_period" << YAML::Value << "900s";
  e << YAML::EndMap;
  e << YAML::EndMap << YAML::EndMap << YAML::EndMap;  // service, services, root
  return std::string(e.c_str()) + "\n";
}

std::string litellm_yaml(const Plan& plan, const std::vector<std::size_t>& seats, const ComposeOptions& opts) {
  YAML::Emitter e;
  e << YAML::Comment("LiteLLM proxy model_list entries generated by fp4forge plan");
  e << YAML::Newline;
  e << YAML::BeginMap << YAML::Key << "model_list" << YAML::Value << YAML::BeginSeq;
  for (std::size_t s : seats) {
    const SeatModel& m = plan.seats[s];
    e << YAML::BeginMap;
    e << YAML::Key << "model_name" << YAML::Value << Str{m.arg.served_name};
    e << YAML::Key << "litellm_params" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "model" << YAML::Value << Str{"hosted_vllm/" + m.arg.served_name};
    e << YAML::Key << "api_base" << YAML::Value
      << Str{fmt::format("http://{}:{}/v1", opts.api_host, host_port(plan.seats[s].arg, s))};
    if (!m.arg.api_key_env.empty())
      e << YAML::Key << "api_key" << YAML::Value << Str{"os.environ/" + m.arg.api_key_env};
    e << YAML::EndMap;
    e << YAML::Key << "model_info" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "max_input_tokens" << YAML::Value << m.max_model_len;
    // A seat served with images says so (LiteLLM's model-info field): gateway reads it to keep a later swap of this
    // alias on a backend that passes the vision check (tryout M-L6: not written, a narrowed gate moved it).
    if (serves_images(m)) e << YAML::Key << "supports_vision" << YAML::Value << true;
    e << YAML::EndMap;
    e << YAML::EndMap;
  }
  e << YAML::EndSeq << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

Result<EmittedFiles> emit_compose(const Plan& plan, const std::filesystem::path& dir, const ComposeOptions& opts) {
  EmittedFiles out;
  std::vector<std::size_t> seats;
  for (std::size_t s = 0; s < plan.seats.size(); ++s) {
    const SeatPlacement& p = plan.placements[s];
    if (p.placed && p.fits)
      seats.push_back(s);
    else if (!p.replaced_by.empty())  // it stops for the seat that replaces it: not a seat left out (tryout R-M1)
      out.stopped_seats.push_back(plan.seats[s].arg.name);
    else if (p.cannot_start && !p.blocker.empty())
      // vLLM refuses it, or its host port clashes: not a seat left out for memory, a set that cannot start (issue
      // 55 tryout: the others' stacks were written beside a warning)
      out.refused.push_back(
          {plan.seats[s].arg.name,
           StartBlocker{"cannot-start", p.blocker, "change what the reason names (the seat's keys), then plan again"}});
    else
      out.skipped_seats.push_back(plan.seats[s].arg.name);
  }
  if (plan.gpus.empty())
    return make_error(Errc::USAGE, "--emit-compose: no GPU is given, so no seat is placed and there is nothing to "
                      "write; hint: add --gpu ID=TOTAL or --gpus-from-nvidia-smi");
  if (seats.empty()) return out;  // no seat fits: nothing written; the plan says why of each (exit 1)
  // A stack is the product, not the folder: a seat vLLM could not start refuses the whole set (issue 51 #3).
  for (std::size_t s : seats)
    for (const auto& b : plan.seats[s].serving.blockers) out.refused.push_back({plan.seats[s].arg.name, b});
  // Then every check doctor runs: a stack is not written for a folder doctor rejects (tryout R-H1).
  for (std::size_t s : seats)
    for (auto& b : doctor_blockers(plan.seats[s])) out.refused.push_back({plan.seats[s].arg.name, std::move(b)});
  if (!out.refused.empty()) return out;
  std::vector<std::pair<std::filesystem::path, std::string>> files;
  for (std::size_t s : seats) {
    const auto sub = dir / plan.seats[s].arg.name;
    files.emplace_back(sub / "compose.yaml", compose_yaml(plan, s, opts));
    files.emplace_back(sub / "litellm.yaml", litellm_yaml(plan, {s}, opts));
  }
  files.emplace_back(dir / "litellm.yaml", litellm_yaml(plan, seats, opts));
  if (!opts.force) {
    for (const auto& [path, text] : files) {
      std::error_code ec;
      if (std::filesystem::exists(std::filesystem::symlink_status(path, ec)))
        return make_error(Errc::USAGE, "--emit-compose: '{}' exists; refusing to overwrite it; hint: pass "
                          "--force to replace the generated files", path.string());
    }
  }
  // All or nothing (issue 27 #16): every file is written in full to its `.partial` first; only when all are
  // on disk are they renamed into place. A full disk leaves no file (the partials are removed), so a rerun
  // needs no --force.
  std::vector<fs::AtomicFile> pending;
  for (const auto& [path, text] : files) {
    FP4FORGE_TRY(fs::make_directories(path.parent_path()));
    FP4FORGE_ASSIGN_OR_RETURN(fs::AtomicFile f, fs::AtomicFile::create(path));
    FP4FORGE_TRY(f.file().write_all(text));
    pending.push_back(std::move(f));
  }
  for (auto& f : pending) {
    FP4FORGE_TRY(f.commit());
    out.files.push_back(f.final_path());
  }
  // An earlier plan's stacks of seats this one does not have: kept (they are the operator's to stop and remove),
  // named, so that `docker compose up` over DIR does not start them unawares.
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const auto compose = entry.path() / "compose.yaml";
    if (!entry.is_directory(ec) || !std::filesystem::is_regular_file(compose, ec)) continue;
    const std::string name = entry.path().filename().string();
    if (std::any_of(seats.begin(), seats.end(), [&](std::size_t s) { return plan.seats[s].arg.name == name; }))
      continue;
    auto head = fs::read_file(compose);
    if (head.ok() && head->rfind("# generated by fp4forge plan", 0) == 0) out.stale.push_back(compose);
  }
  return out;
}

}  // namespace fp4forge::kvplan
