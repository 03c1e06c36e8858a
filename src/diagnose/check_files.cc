// Processor and tokenizer files (architectures.md §6; F33, F34, F35, F36).
#include <algorithm>
#include <charconv>
#include <map>
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

void add_invalid_json(FindingSink& out, const std::string& file, const Error& e) {
  out.add(finding_kind("invalid-json-file"),
          {.message = fmt::format("{} cannot be parsed: {}", file, e.message),
           .key = file,
           .expected = "valid JSON",
           .actual = e.message,
           .hint = "loaders that read this file will fail; restore it from the source checkpoint"});
}

void check_image_processor(const Context& ctx, const std::string& label, const Json& ip, FindingSink& out) {
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
    FindingFields f;
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
    out.add(finding_kind("processor-mismatch"), std::move(f));
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
    out.add(finding_kind("processor-mismatch"),
            {.severity = gib > 16.0 ? Severity::ERROR : Severity::WARNING,
             .message =
                 fmt::format("{} {} = {} ({}) lets one image become ~{:.0f} patches of {}x{}: vLLM's startup profile "
                             "run uses such a dummy image and needs ~13·patches² ≈ {:.1f} GiB of host RAM (vllm "
                             "#46268)",
                             label, edge_key, *edge, pixel_count ? "pixels" : "pixels per edge", patches, p, p, gib),
             .key = fmt::format("{}:{}", label, edge_key),
             .expected = pixel_count ? "a pixel budget of a few million (Qwen2-VL default 1003520)"
                                     : "an edge of a few thousand pixels",
             .actual = fmt::format("{}", *edge),
             .hint = "lower the limit (or pass --mm-processor-kwargs / --limit-mm-per-prompt when serving)"});
  }
}

/** Token ids a tokenizer can produce at or above the model's vocab_size, each with its text (for messages). */
struct IdsBeyond {
  std::int64_t max_id = -1;                                  ///< highest id seen (-1: none counted)
  std::map<std::int64_t, std::string> beyond;                ///< id >= vocab_size -> token
  std::set<std::string> files;                               ///< where the ids were read
};

void ids_of_map(const Json& m, std::int64_t v, IdsBeyond& r, const std::string& file) {
  if (!m.is_object()) return;
  r.files.insert(file);
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (!it->is_number_integer()) continue;
    const std::int64_t id = it->get<std::int64_t>();
    r.max_id = std::max(r.max_id, id);
    if (id >= v) r.beyond.emplace(id, it.key());
  }
}

/** `tokenizer-vocab-size`: a tokenizer that produces ids the model's embedding has no row for. vLLM accepts a
 * prompt id up to max(tokenizer.max_token_id, vocab_size - 1) (vllm/v1/engine/input_processor.py,
 * _validate_model_input, commit 009daae) and embeds it through the [vocab_size, H] table; fewer tokenizer ids than
 * rows is common (padded vocabularies, Qwen3) and fine. Ids the config names as its multimodal placeholders
 * (`image_token_id`, ...) may lie beyond the table (the same vLLM comment). */
void check_vocabulary(const Context& ctx, const std::optional<Json>& vocab, const std::optional<Json>& added,
                      const std::optional<Json>& tokenizer_config, FindingSink& out) {
  const std::int64_t v = ctx.info.vocab_size;
  if (v <= 0) return;  // the config states no vocabulary size: nothing to compare with
  IdsBeyond r;
  if (vocab && vocab->is_object()) {
    ids_of_map(*vocab, v, r, "tokenizer.json");
  } else if (vocab && vocab->is_array()) {  // Unigram: [piece, score] pairs, the id is the position
    r.files.insert("tokenizer.json");
    const auto n = static_cast<std::int64_t>(vocab->size());
    r.max_id = std::max(r.max_id, n - 1);
    for (std::int64_t id = v; id < n; ++id) {
      const Json& e = (*vocab)[static_cast<std::size_t>(id)];
      r.beyond.emplace(id, e.is_array() && !e.empty() && e[0].is_string() ? e[0].get<std::string>() : "");
    }
  } else if (!vocab) {
    auto vj = read_json_file(serving_path(ctx.tokenizer_dir, "vocab.json", &ctx.overlay));  // GPT-2 style
    if (vj.ok() && *vj) ids_of_map(**vj, v, r, "vocab.json");
    auto aj = read_json_file(serving_path(ctx.tokenizer_dir, "added_tokens.json", &ctx.overlay));
    if (aj.ok() && *aj) ids_of_map(**aj, v, r, "added_tokens.json");
  }
  if (added && added->is_array()) {
    for (const auto& t : *added) {
      const auto id = int_of(t, "id");
      if (!id) continue;
      r.max_id = std::max(r.max_id, *id);
      if (*id >= v) r.beyond.emplace(*id, t.is_object() && t.contains("content") && t["content"].is_string()
                                              ? t["content"].get<std::string>() : "");
    }
  }
  if (tokenizer_config && tokenizer_config->is_object())
    if (auto it = tokenizer_config->find("added_tokens_decoder"); it != tokenizer_config->end() && it->is_object())
      for (auto t = it->begin(); t != it->end(); ++t) {
        std::int64_t id = 0;
        const std::string& k = t.key();
        if (k.empty() || std::from_chars(k.data(), k.data() + k.size(), id).ec != std::errc() || id < 0) continue;
        r.files.insert("tokenizer_config.json");
        r.max_id = std::max(r.max_id, id);
        if (id >= v) r.beyond.emplace(id, t->is_object() && t->contains("content") && (*t)["content"].is_string()
                                               ? (*t)["content"].get<std::string>() : "");
      }
  // The config's own special ids (image_token_id, video_token_index, ...) are the model's placeholders.
  std::set<std::int64_t> named;
  for (const Json* j : {&ctx.config, &ctx.text()})
    if (j->is_object())
      for (auto it = j->begin(); it != j->end(); ++it)
        if ((it.key().ends_with("_token_id") || it.key().ends_with("_token_index")) && it->is_number_integer())
          named.insert(it->get<std::int64_t>());
  for (auto it = r.beyond.begin(); it != r.beyond.end();) it = named.count(it->first) ? r.beyond.erase(it) : std::next(it);
  if (r.beyond.empty()) return;
  const bool multimodal = ctx.info.has_vision_config || ctx.info.has_audio_config;
  std::vector<std::string> examples;
  for (const auto& [id, tok] : r.beyond) {
    if (examples.size() == 3) break;
    examples.push_back(fmt::format("{} '{}'", id, tok));
  }
  FindingFields f;
  // A multimodal model may keep placeholder tokens outside its text table under names fp4forge does not know:
  // it cannot be sure there, and warns.
  f.severity = multimodal ? Severity::WARNING : Severity::ERROR;
  f.key = fmt::format("{}", fmt::join(r.files, ", "));
  f.expected = fmt::format("token ids below vocab_size {} (the embedding's rows)", v);
  f.actual = fmt::format("{} id(s) at or above it, highest {}", r.beyond.size(), r.max_id);
  f.message = fmt::format("the tokenizer produces {} token id(s) at or above the model's vocab_size {} (e.g. {}): "
                          "vLLM accepts such an id in a prompt and looks it up in a table of {} rows{}",
                          r.beyond.size(), v, fmt::join(examples, ", "), v,
                          multimodal ? "; a multimodal model may place image or audio tokens there (the config names "
                                       "none of these ids), so this could not be proven wrong"
                                     : "");
  f.hint = "the tokenizer belongs to another model (or a resized vocabulary): use the release's own tokenizer files";
  out.add(finding_kind("tokenizer-vocab-size"), std::move(f));
}
}  // namespace

void check_processor(const Context& ctx, FindingSink& out) {
  const bool vision_tensors = ctx.any_with_prefix("model.vision_tower.") || ctx.any_with_prefix("model.visual.");
  const bool multimodal = ctx.info.has_vision_config || vision_tensors;
  auto pc_r = read_json_file(serving_path(ctx.dir, "processor_config.json", &ctx.overlay));
  auto pp_r = read_json_file(serving_path(ctx.dir, "preprocessor_config.json", &ctx.overlay));
  if (!pc_r.ok()) add_invalid_json(out, "processor_config.json", pc_r.error());
  if (!pp_r.ok()) add_invalid_json(out, "preprocessor_config.json", pp_r.error());
  const std::optional<Json> pc = pc_r.ok() ? *pc_r : std::nullopt;
  const std::optional<Json> pp = pp_r.ok() ? *pp_r : std::nullopt;
  const Json* ip = nullptr;
  if (pc && pc->is_object())
    if (auto it = pc->find("image_processor"); it != pc->end() && it->is_object()) ip = &*it;

  if (multimodal && ip == nullptr && !pp && pc_r.ok() && pp_r.ok()) {
    out.add(
        finding_kind("missing-processor"),
        {.message = "multimodal checkpoint without an image processor: vLLM cannot construct the processor, and the "
                    "startup profile run needs one (typical of a quantizer that saved only the tokenizer)",
         .key = "preprocessor_config.json",
         .expected = "processor_config.json with an image_processor section, or preprocessor_config.json",
         .actual = "neither",
         .hint = "copy processor_config.json / preprocessor_config.json from the source checkpoint"});
  }
  if (ip != nullptr && !pp && pp_r.ok()) {
    out.add(
        finding_kind("missing-preprocessor-config"),
        {.message = "processor_config.json holds an image_processor section but there is no preprocessor_config.json: "
                    "transformers 5 reads the nested form, but transformers 4.x and many non-HF loaders look only for "
                    "preprocessor_config.json",
         .key = "preprocessor_config.json",
         .expected = "preprocessor_config.json beside processor_config.json",
         .actual = "absent",
         .fix = "write preprocessor_config.json verbatim from processor_config.json's image_processor section"});
  }
  if (ip != nullptr && pp && !same_json(*pp, *ip)) {
    std::set<std::string> keys;
    for (auto it = ip->begin(); it != ip->end(); ++it)
      if (!pp->is_object() || !pp->contains(it.key()) || !same_json((*pp)[it.key()], it.value()))
        keys.insert(it.key());
    if (pp->is_object())
      for (auto it = pp->begin(); it != pp->end(); ++it)
        if (!ip->contains(it.key())) keys.insert(it.key());
    FindingFields f;
    f.severity = Severity::WARNING;
    f.key = "preprocessor_config.json";
    f.expected = "the same content as processor_config.json:image_processor";
    f.actual = fmt::format("differs in {}", fmt::join(keys, ", "));
    f.message = fmt::format("preprocessor_config.json and processor_config.json's image_processor differ ({}): "
                            "transformers 5 uses the latter, transformers 4.x and other loaders the former, so "
                            "they preprocess images differently", f.actual);
    out.add(finding_kind("processor-mismatch"), std::move(f));
  }
  if (ip != nullptr) check_image_processor(ctx, "processor_config.json:image_processor", *ip, out);
  if (pp) check_image_processor(ctx, "preprocessor_config.json", *pp, out);
}

void check_tokenizer(const Context& ctx, FindingSink& out) {
  const std::int64_t mpe = ctx.info.max_position_embeddings;
  std::error_code ec;
  const std::filesystem::path& dir = ctx.tokenizer_dir;
  const bool elsewhere = !ctx.tokenizer_from.empty();
  const std::string where = elsewhere ? fmt::format("the tokenizer source '{}' (doctor --tokenizer)", ctx.tokenizer_from)
                                      : std::string("the folder");
  // The serving-file check has one home (model/serving_files.h): verify and inspect report the same findings.
  check_serving_files(dir, ctx.tokenizer_from, out, &ctx.overlay);
  if (dir.empty()) return;  // tokenizer-unchecked: nothing more can be read
  const auto tj = serving_path(dir, "tokenizer.json", &ctx.overlay);
  std::optional<Json> vocab, added;  // tokenizer.json's model.vocab and added_tokens, for the vocabulary check
  if (std::filesystem::exists(tj, ec)) {
    auto text = fs::read_file(tj);  // the JSON-file cap (256 MiB), as for every JSON file
    if (!text.ok()) {
      add_invalid_json(out, "tokenizer.json", text.error());
    } else {
      auto doc = JsonDocument::parse(std::move(*text), "tokenizer.json");
      if (!doc.ok()) {
        add_invalid_json(out, "tokenizer.json", doc.error());
      } else {
        vocab = doc->get({"model", "vocab"});
        added = doc->get({"added_tokens"});
        const auto trunc = doc->get({"truncation"});
        const auto pad = doc->get({"padding"});
        std::vector<std::string> set;
        if (trunc && !trunc->is_null()) set.push_back("truncation");
        if (pad && !pad->is_null()) set.push_back("padding");
        if (!set.empty()) {
          std::optional<std::int64_t> maxlen;
          if (trunc && trunc->is_object()) maxlen = int_of(*trunc, "max_length");
          FindingFields f;
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
          out.add(finding_kind("tokenizer-truncation"), std::move(f));
        }
      }
    }
  }
  auto tc_r = read_json_file(serving_path(dir, "tokenizer_config.json", &ctx.overlay));
  if (!tc_r.ok()) {
    add_invalid_json(out, "tokenizer_config.json", tc_r.error());
    return;
  }
  check_vocabulary(ctx, vocab, added, *tc_r, out);
  if (!*tc_r || mpe <= 0) return;
  const Json& tc = **tc_r;
  for (const char* key : {"model_max_length", "max_length"}) {
    const auto v = num_of(tc, key);
    if (!v || *v >= static_cast<double>(mpe)) continue;
    FindingFields f;
    f.key = fmt::format("tokenizer_config.json:{}", key);
    f.expected = fmt::format("≥ max_position_embeddings ({})", mpe);
    f.actual = tc[key].dump();
    f.message = fmt::format("tokenizer_config.json {} = {} is below the model's max_position_embeddings {}: the "
                            "tokenizer cap disagrees with the model (prompts cut or clamped, device-side asserts at "
                            "the boundary, vllm PR #19201)", key, f.actual, mpe);
    f.hint = fmt::format("set {} to {} (or remove it) unless the model is really limited to {} tokens", key, mpe,
                         f.actual);
    out.add(finding_kind("tokenizer-max-length"), std::move(f));
  }
}

}  // namespace fp4forge::doctor
