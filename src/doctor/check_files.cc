// Processor and tokenizer files (architectures.md §6; F33, F34, F35, F36).
#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "checks.h"
#include "fp4forge/util/json_edit.h"
#include "fp4forge/model/serving_files.h"
#include "fp4forge/util/fs.h"

namespace fp4forge::doctor {
namespace {

constexpr std::int64_t kSoftTokens[] = {70, 140, 280, 560, 1120};

std::optional<double> num_of(const Json& j, std::string_view key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

Finding invalid_json(const std::string& file, const Error& e) {
  Finding f;
  f.kind = "invalid-json-file";
  f.severity = Severity::ERROR;
  f.key = file;
  f.actual = e.message;
  f.expected = "valid JSON";
  f.message = fmt::format("{} cannot be parsed: {}", file, e.message);
  f.hint = "loaders that read this file will fail; restore it from the source checkpoint";
  return f;
}

void check_image_processor(const Context& ctx, const std::string& label, const Json& ip,
                           std::vector<Finding>& out) {
  const Json* vc = nullptr;
  if (auto it = ctx.config.find("vision_config"); it != ctx.config.end() && it->is_object()) vc = &*it;
  std::vector<std::string> bad;
  auto cmp = [&](std::string_view pkey, std::string_view vkey) {
    if (vc == nullptr) return;
    const auto a = int_of(ip, pkey);
    const auto b = int_of(*vc, vkey);
    if (a && b && *a != *b) bad.push_back(fmt::format("{} {} vs vision_config.{} {}", pkey, *a, vkey, *b));
  };
  const std::string type = ip.is_object() && ip.contains("image_processor_type") && ip["image_processor_type"].is_string()
                               ? ip["image_processor_type"].get<std::string>()
                               : std::string();
  const Family fam = ctx.info.family;
  cmp("patch_size", "patch_size");
  if (fam == Family::GEMMA4) {
    cmp("pooling_kernel_size", "pooling_kernel_size");
    if (auto mst = int_of(ip, "max_soft_tokens");
        mst && std::find(std::begin(kSoftTokens), std::end(kSoftTokens), *mst) == std::end(kSoftTokens))
      bad.push_back(fmt::format("max_soft_tokens {} is not one of 70, 140, 280, 560, 1120", *mst));
  }
  if (fam == Family::QWEN3_5 || fam == Family::QWEN3_5_MOE) {
    cmp("temporal_patch_size", "temporal_patch_size");
    cmp("merge_size", "spatial_merge_size");
  }
  if (!bad.empty()) {
    Finding f;
    f.kind = "processor-mismatch";
    // The processor's keys mean what its class makes of them: for a family outside the registry a differing
    // patch_size may be a tile (Step-3.x's image processor crops 504-pixel tiles for a 16-pixel ViT patch), so
    // the check cannot be sure and warns.
    const bool known = fam != Family::UNKNOWN;
    f.severity = known ? Severity::ERROR : Severity::WARNING;
    f.key = label;
    f.expected = "image-processor sizes equal to vision_config";
    f.actual = fmt::format("{}", fmt::join(bad, "; "));
    f.message = fmt::format("{} disagrees with config.json: {}; images would be cut into patches the vision "
                            "tower was not built for", label, f.actual);
    f.hint = fam == Family::QWEN3_5 || fam == Family::QWEN3_5_MOE
                 ? "Qwen3.5 uses patch 16, temporal patch 2, merge 2 (Qwen2-VL's defaults of 14 are wrong here)"
             : known ? "copy the sizes from vision_config"
                     : "the family is not in fp4forge's registry, so what its processor means by these keys was not "
                       "checked; compare with the original release's processor_config.json";
    out.push_back(std::move(f));
  }
  // Absurd image size (F34): vLLM's profile run allocates for the largest image the processor allows.
  if (!ip.is_object()) return;
  std::optional<double> edge;
  std::string edge_key;
  if (auto s = ip.find("size"); s != ip.end() && s->is_object()) {
    edge = num_of(*s, "longest_edge");
    edge_key = "size.longest_edge";
  }
  if (!edge) {
    edge = num_of(ip, "max_pixels");
    edge_key = "max_pixels";
  }
  if (!edge || *edge <= 0) return;
  const bool pixel_count = edge_key == "max_pixels" || type.rfind("Qwen2VL", 0) == 0 ||
                           type.rfind("Qwen3VL", 0) == 0 || ip.contains("merge_size") ||
                           ip.contains("temporal_patch_size");
  double p = static_cast<double>(int_of(ip, "patch_size").value_or(vc ? int_of(*vc, "patch_size").value_or(14) : 14));
  if (p <= 0) p = 14;
  const double patches = pixel_count ? *edge / (p * p) : std::pow(*edge / p, 2.0);
  const double bytes = 13.0 * patches * patches;
  const double gib = bytes / (1024.0 * 1024.0 * 1024.0);
  if (gib > 4.0) {
    Finding f;
    f.kind = "processor-mismatch";
    f.severity = gib > 16.0 ? Severity::ERROR : Severity::WARNING;
    f.key = fmt::format("{}:{}", label, edge_key);
    f.actual = fmt::format("{}", *edge);
    f.expected = pixel_count ? "a pixel budget of a few million (Qwen2-VL default 1003520)" : "an edge of a few thousand pixels";
    f.message = fmt::format("{} {} = {} ({}) lets one image become ~{:.0f} patches of {}x{}: vLLM's startup profile "
                            "run uses such a dummy image and needs ~13·patches² ≈ {:.1f} GiB of host RAM (vllm "
                            "#46268)", label, edge_key, *edge, pixel_count ? "pixels" : "pixels per edge", patches,
                            p, p, gib);
    f.hint = "lower the limit (or pass --mm-processor-kwargs / --limit-mm-per-prompt when serving)";
    out.push_back(std::move(f));
  }
}

}  // namespace

void check_processor(const Context& ctx, std::vector<Finding>& out) {
  const bool vision_tensors = ctx.any_with_prefix("model.vision_tower.") || ctx.any_with_prefix("model.visual.");
  const bool multimodal = ctx.info.has_vision_config || vision_tensors;
  auto pc_r = read_json_file(ctx.dir / "processor_config.json");
  auto pp_r = read_json_file(ctx.dir / "preprocessor_config.json");
  if (!pc_r.ok()) out.push_back(invalid_json("processor_config.json", pc_r.error()));
  if (!pp_r.ok()) out.push_back(invalid_json("preprocessor_config.json", pp_r.error()));
  const std::optional<Json> pc = pc_r.ok() ? *pc_r : std::nullopt;
  const std::optional<Json> pp = pp_r.ok() ? *pp_r : std::nullopt;
  const Json* ip = nullptr;
  if (pc && pc->is_object())
    if (auto it = pc->find("image_processor"); it != pc->end() && it->is_object()) ip = &*it;

  if (multimodal && ip == nullptr && !pp && pc_r.ok() && pp_r.ok()) {
    Finding f;
    f.kind = "missing-processor";
    f.severity = Severity::ERROR;
    f.key = "preprocessor_config.json";
    f.expected = "processor_config.json with an image_processor section, or preprocessor_config.json";
    f.actual = "neither";
    f.message = "multimodal checkpoint without an image processor: vLLM cannot construct the processor, and the "
                "startup profile run needs one (typical of a quantizer that saved only the tokenizer)";
    f.hint = "copy processor_config.json / preprocessor_config.json from the source checkpoint";
    out.push_back(std::move(f));
  }
  if (ip != nullptr && !pp && pp_r.ok()) {
    Finding f;
    f.kind = "missing-preprocessor-config";
    f.severity = Severity::WARNING;
    f.key = "preprocessor_config.json";
    f.expected = "preprocessor_config.json beside processor_config.json";
    f.actual = "absent";
    f.message = "processor_config.json holds an image_processor section but there is no preprocessor_config.json: "
                "transformers 5 reads the nested form, but transformers 4.x and many non-HF loaders look only for "
                "preprocessor_config.json";
    f.fix = "write preprocessor_config.json verbatim from processor_config.json's image_processor section";
    out.push_back(std::move(f));
  }
  if (ip != nullptr && pp && !same_json(*pp, *ip)) {
    std::set<std::string> keys;
    for (auto it = ip->begin(); it != ip->end(); ++it)
      if (!pp->is_object() || !pp->contains(it.key()) || !same_json((*pp)[it.key()], it.value()))
        keys.insert(it.key());
    if (pp->is_object())
      for (auto it = pp->begin(); it != pp->end(); ++it)
        if (!ip->contains(it.key())) keys.insert(it.key());
    Finding f;
    f.kind = "processor-mismatch";
    f.severity = Severity::WARNING;
    f.key = "preprocessor_config.json";
    f.expected = "the same content as processor_config.json:image_processor";
    f.actual = fmt::format("differs in {}", fmt::join(keys, ", "));
    f.message = fmt::format("preprocessor_config.json and processor_config.json's image_processor differ ({}): "
                            "transformers 5 uses the latter, transformers 4.x and other loaders the former, so "
                            "they preprocess images differently", f.actual);
    out.push_back(std::move(f));
  }
  if (ip != nullptr) check_image_processor(ctx, "processor_config.json:image_processor", *ip, out);
  if (pp) check_image_processor(ctx, "preprocessor_config.json", *pp, out);
}

void check_tokenizer(const Context& ctx, std::vector<Finding>& out) {
  const std::int64_t mpe = ctx.info.max_position_embeddings;
  std::error_code ec;
  const std::filesystem::path& dir = ctx.tokenizer_dir;
  const bool elsewhere = !ctx.tokenizer_from.empty();
  const std::string where = elsewhere ? fmt::format("the tokenizer source '{}' (doctor --tokenizer)", ctx.tokenizer_from)
                                      : std::string("the folder");
  if (dir.empty()) {  // --tokenizer names what cannot be read here: say so, never guess
    Finding f;
    f.kind = "tokenizer-unchecked";
    f.severity = Severity::WARNING;
    f.key = "--tokenizer";
    f.expected = "a local folder, or a repo id in the Hugging Face cache";
    f.actual = ctx.tokenizer_from;
    f.message = fmt::format("the tokenizer comes from '{}', which is neither a local folder nor a repo in the Hugging "
                            "Face cache: its tokenizer files and chat template were not checked",
                            ctx.tokenizer_from);
    f.hint = fmt::format("download it first (hf download {}) or name a local copy", ctx.tokenizer_from);
    out.push_back(std::move(f));
    return;
  }
  // Issue 29: a folder without any tokenizer passed every check, yet vLLM cannot serve it. vLLM's `--tokenizer`
  // defaults to the model folder, and start-up fails when nothing there loads as a tokenizer: an error, unless
  // doctor --tokenizer says where vLLM will be pointed instead.
  {
    const ServingFiles sf = serving_files(dir);
    if (sf.tokenizer && !sf.chat_template) {
      Finding f;
      f.kind = "missing-chat-template";
      f.severity = Severity::WARNING;
      f.expected = "chat_template.jinja, chat_template.json or tokenizer_config.json:chat_template";
      f.actual = "none";
      f.message = fmt::format("no chat template in {}: vLLM's /v1/chat/completions refuses requests (transformers "
                              "supplies no default template); a base model served for /v1/completions needs none",
                              where);
      f.hint = "copy chat_template.jinja (or tokenizer_config.json) from the original release, or serve with "
               "--chat-template";
      out.push_back(std::move(f));
    }
    if (!sf.tokenizer) {
      Finding f;
      f.kind = "missing-tokenizer";
      f.severity = Severity::ERROR;
      f.key = elsewhere ? "--tokenizer" : "";
      f.expected = "tokenizer.json (or tokenizer.model, vocab.json + merges.txt, a tiktoken file)";
      f.actual = "none";
      f.message = elsewhere
                      ? fmt::format("no tokenizer file in {}: vLLM started with --tokenizer {} fails to load one",
                                    where, ctx.tokenizer_from)
                      : "no tokenizer file: vLLM cannot serve the folder as it is (its --tokenizer defaults to the "
                        "model folder, and start-up fails when no tokenizer loads from it)";
      f.hint = elsewhere ? "name the folder (or cached repo) that holds the release's tokenizer files"
                         : "copy the tokenizer files (and chat template) from the original release; if vLLM will be "
                           "started with --tokenizer SRC, say so: fp4forge doctor DIR --tokenizer SRC";
      out.push_back(std::move(f));
    }
  }
  const auto tj = dir / "tokenizer.json";
  if (std::filesystem::exists(tj, ec)) {
    auto text = fs::read_file(tj);  // the JSON-file cap (256 MiB), as for every JSON file
    if (!text.ok()) {
      out.push_back(invalid_json("tokenizer.json", text.error()));
    } else {
      auto doc = JsonDocument::parse(std::move(*text), "tokenizer.json");
      if (!doc.ok()) {
        out.push_back(invalid_json("tokenizer.json", doc.error()));
      } else {
        const auto trunc = doc->get({"truncation"});
        const auto pad = doc->get({"padding"});
        std::vector<std::string> set;
        if (trunc && !trunc->is_null()) set.push_back("truncation");
        if (pad && !pad->is_null()) set.push_back("padding");
        if (!set.empty()) {
          std::optional<std::int64_t> maxlen;
          if (trunc && trunc->is_object()) maxlen = int_of(*trunc, "max_length");
          Finding f;
          f.kind = "tokenizer-truncation";
          f.severity = Severity::WARNING;
          f.key = fmt::format("tokenizer.json:{}", set.front());
          f.expected = "null";
          f.actual = fmt::format("{}{}", fmt::join(set, " and "), set.size() > 1 ? " are set" : " is set");
          f.message = fmt::format(
              "tokenizer.json has a non-null {}{}: every consumer of the tokenizers library (Rust, "
              "Tokenizer.from_file, tokenizers-cpp) silently {} prompts; transformers and vLLM are unaffected",
              fmt::join(set, " and "),
              maxlen ? fmt::format(" (truncation.max_length {}{})", *maxlen,
                                   mpe > 0 && *maxlen < mpe ? fmt::format(", below max_position_embeddings {}", mpe) : "")
                     : "",
              trunc && !trunc->is_null() ? "truncates" : "pads");
          // doctor --fix writes the model folder only: a tokenizer source elsewhere is reported, not edited.
          if (!elsewhere)
            f.fix = fmt::format("set {} to null in tokenizer.json (what transformers' save_pretrained writes)",
                                fmt::join(set, " and "));
          f.hint = elsewhere ? fmt::format("in {}; typical of a dataset-calibrated quantization run that saved its "
                                           "tokenizer state", where)
                             : "typical of a dataset-calibrated quantization run that saved its tokenizer state";
          out.push_back(std::move(f));
        }
      }
    }
  }
  auto tc_r = read_json_file(dir / "tokenizer_config.json");
  if (!tc_r.ok()) {
    out.push_back(invalid_json("tokenizer_config.json", tc_r.error()));
    return;
  }
  if (!*tc_r || mpe <= 0) return;
  const Json& tc = **tc_r;
  for (const char* key : {"model_max_length", "max_length"}) {
    const auto v = num_of(tc, key);
    if (!v || *v >= static_cast<double>(mpe)) continue;
    Finding f;
    f.kind = "tokenizer-max-length";
    f.severity = Severity::ERROR;
    f.key = fmt::format("tokenizer_config.json:{}", key);
    f.expected = fmt::format("≥ max_position_embeddings ({})", mpe);
    f.actual = tc[key].dump();
    f.message = fmt::format("tokenizer_config.json {} = {} is below the model's max_position_embeddings {}: the "
                            "tokenizer cap disagrees with the model (prompts cut or clamped, device-side asserts at "
                            "the boundary, vllm PR #19201)", key, f.actual, mpe);
    f.hint = fmt::format("set {} to {} (or remove it) unless the model is really limited to {} tokens", key, mpe,
                         f.actual);
    out.push_back(std::move(f));
  }
}

}  // namespace fp4forge::doctor
