// Issue 51: quantize runs doctor's checks on its source before any work (a doctor error refuses, exit 3, nothing
// written; --no-preflight is the escape hatch), and its output is servable as written: what doctor --fix would
// derive (preprocessor_config.json, a tokenizer without truncation), and the tokenizer / processor files a source
// lacks taken from a reference release (--tokenizer-from / --processor-from), checked as doctor checks them. verify
// and inspect report a missing tokenizer (error) and chat template (warning) as doctor does.
// Every variant is a real fixture of tests/data changed in a temporary folder.
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/quantize/run.h"
#include "hf_cache_fake.h"
#include "test_util.h"

namespace fp4forge {
namespace {

using namespace fp4forge::testutil;
namespace fsys = std::filesystem;
using Json = nlohmann::json;

/** A copy of tests/data/<name> at `dst`. */
fsys::path copy_fixture(const std::string& name, const fsys::path& dst) {
  fsys::copy(kData + "/" + name, dst, fsys::copy_options::recursive);
  return dst;
}

void edit_json(const fsys::path& p, const std::function<void(Json&)>& fn) {
  Json j = Json::parse(slurp(p));
  fn(j);
  std::ofstream(p, std::ios::trunc) << j.dump(2) << "\n";
}

/** gemma4-moe-mm as a transformers re-save that lost the flat global-KV fields (F27): no per_layer_config either. */
fsys::path gemma4_without_globals(const fsys::path& dst) {
  copy_fixture("gemma4-moe-mm", dst);
  edit_json(dst / "config.json", [](Json& c) {
    for (const char* k : {"per_layer_config", "global_head_dim", "num_global_key_value_heads"}) c["text_config"].erase(k);
  });
  return dst;
}

void remove_tokenizer(const fsys::path& dir) {
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}) fsys::remove(dir / f);
}

/** Lines of `err` that contain `needle`. */
std::size_t lines_with(const std::string& err, const std::string& needle) {
  std::size_t n = 0, at = 0;
  while ((at = err.find(needle, at)) != std::string::npos) {
    ++n;
    at += needle.size();
  }
  return n;
}

void expect_nothing_written(const fsys::path& dst) {
  EXPECT_FALSE(fsys::exists(dst)) << dst;
  const fsys::path staging = dst.parent_path() / ("." + dst.filename().string() + ".fp4forge-staging");
  EXPECT_FALSE(fsys::exists(staging)) << staging;
}

TEST(QuantizePreflight, GemmaConfigMissingGlobalKvFieldsIsRefusedWithTheFix) {
  TempDir t;
  const auto src = gemma4_without_globals(t.path / "g");
  const auto before = file_contents(src);
  std::string out, err;
  ASSERT_EQ(run_cli("doctor " + q(src), &out, &err), 1) << out;  // doctor calls it an error
  EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " -j 2", &out, &err), 3) << err;
  expect_nothing_written(t.path / "q");
  // One error, one line: what, where, the fix, the escape hatch.
  EXPECT_EQ(lines_with(err, "\n"), 1u) << err;
  EXPECT_EQ(err.rfind("fp4forge: error: quantize refused by its preflight: gemma4-missing-global-kv-fields in ", 0), 0u)
      << err;
  EXPECT_NE(err.find("fix: fp4forge doctor " + q(src.string()) + " --fix"), std::string::npos) << err;
  EXPECT_NE(err.find("; nothing written; --no-preflight quantizes anyway\n"), std::string::npos) << err;
  // --json: the error object and the preflight that refused.
  EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " -j 2 --json", &out, &err), 3);
  const auto j = Json::parse(out);
  EXPECT_FALSE(j["ok"].get<bool>());
  EXPECT_EQ(j["error"]["exit_code"], 3);
  EXPECT_TRUE(j["preflight"]["refused"].get<bool>());
  EXPECT_EQ(j["preflight"]["errors"], 1);
  EXPECT_EQ(j["preflight"]["findings"][0]["kind"], "gemma4-missing-global-kv-fields");
  // A dry run refuses as the run would; --resume runs the preflight again.
  EXPECT_EQ(run_cli("quantize " + q(src) + " --dry-run", &out, &err), 3) << err;
  EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " --resume -j 2", &out, &err), 3) << err;
  expect_nothing_written(t.path / "q");
  EXPECT_EQ(file_contents(src), before);  // the source is never written
  // doctor --fix names the derived fields; the fixed copy then quantizes.
  ASSERT_EQ(run_cli("doctor " + q(src) + " --fix", &out, &err), 0) << out << err;
  EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " -j 2", &out, &err), 0) << err;
}

// Tryout P-L4: a warning the preflight said is not said again by the plan (index-total-size came twice).
TEST(QuantizePreflight, APreflightWarningIsSaidOnce) {
  TempDir t;
  const auto src = t.path / "src";
  fsys::copy(kData + "/qwen3_5-dense", src, fsys::copy_options::recursive);
  auto ix = Json::parse(slurp(src / "model.safetensors.index.json"));
  ix["metadata"]["total_size"] = 123;
  std::ofstream(src / "model.safetensors.index.json") << ix.dump(2);
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " -j 2 --no-progress", &out, &err), 0) << err;
  const std::string needle = "metadata.total_size is 123";
  const auto first = err.find(needle);
  ASSERT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find(needle, first + 1), std::string::npos) << err;
}

TEST(QuantizePreflight, NoPreflightIsTheEscapeHatch) {
  TempDir t;
  const auto src = gemma4_without_globals(t.path / "g");
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " -j 2 --no-preflight --json", &out, &err), 0)
      << err;
  const auto j = Json::parse(out);
  EXPECT_FALSE(j["preflight"]["ran"].get<bool>());
  EXPECT_TRUE(j["preflight"]["findings"].empty());
  EXPECT_EQ(err.find("preflight:"), std::string::npos) << err;
  // The serving files are still derived without the checks.
  EXPECT_TRUE(fsys::exists(t.path / "q" / "preprocessor_config.json"));
}

// A quantized release is read as a source: doctor's structural checks of serving it as it is (an FP8 block scheme
// over K = 320, not whole 128-blocks) do not refuse quantize, which expands and re-encodes it.
TEST(QuantizePreflight, AQuantizedSourceIsNotHeldToServingItsOwnScheme) {
  TempDir t;
  const std::string src = kData + "/fp8/ct-fp8-block";
  std::string out, err;
  ASSERT_EQ(run_cli("doctor " + q(src) + " --json", &out, &err), 1) << out;
  EXPECT_NE(failing_findings(out).find("k-not-multiple"), std::string::npos) << out;
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " -j 2 --json", &out, &err), 0) << err;
  const auto j = Json::parse(out)["preflight"];
  EXPECT_TRUE(j["ran"].get<bool>());
  EXPECT_EQ(j["errors"], 0);
  EXPECT_EQ(run_cli("verify " + q(t.path / "q") + " --against " + q(src), &out, &err), 0) << out;
}

// F30: a multimodal class named over flat text-only tensors (a Qwen3.5 text checkpoint labelled as the wrapper).
TEST(QuantizePreflight, WrapperArchitectureOverFlatTextTensorsIsRefused) {
  TempDir t;
  const auto src = copy_fixture("qwen3_5-dense", t.path / "m");
  edit_json(src / "config.json", [](Json& c) { c["architectures"] = {"Qwen3_5ForConditionalGeneration"}; });
  std::string out, err;
  EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " -j 2", &out, &err), 3) << err;
  EXPECT_NE(err.find("preflight: wrapper-flat-mismatch in "), std::string::npos) << err;
  expect_nothing_written(t.path / "q");
}

TEST(QuantizePreflight, MissingProcessorIsRefusedThenTakenFromAReference) {
  TempDir t;
  const auto src = copy_fixture("gemma4-moe-mm", t.path / "g");
  fsys::remove(src / "processor_config.json");
  const auto before = file_contents(src);
  std::string out, err;
  EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " -j 2", &out, &err), 3) << err;
  EXPECT_NE(err.find("preflight: missing-processor in "), std::string::npos) << err;
  EXPECT_NE(err.find("fix: --processor-from REF"), std::string::npos) << err;
  expect_nothing_written(t.path / "q");

  const std::string ref = kData + "/gemma4-moe-mm";
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " -j 2 --processor-from " + q(ref) + " --json", &out,
                    &err), 0) << err;
  const auto j = Json::parse(out);
  const auto& sv = j["preflight"]["serving_files"];
  ASSERT_EQ(sv.size(), 2u) << sv.dump(1);
  EXPECT_EQ(sv[0]["file"], "processor_config.json");
  EXPECT_EQ(sv[0]["action"], "taken");
  EXPECT_EQ(sv[0]["option"], "--processor-from");
  EXPECT_EQ(sv[1]["file"], "preprocessor_config.json");
  EXPECT_EQ(sv[1]["action"], "derived");
  EXPECT_EQ(slurp(t.path / "q" / "processor_config.json"), slurp(ref + "/processor_config.json"));
  EXPECT_EQ(file_contents(src), before);
  // Servable as written: doctor and verify --against find no error, and no warning doctor --fix would fix.
  ASSERT_EQ(run_cli("doctor " + q(t.path / "q") + " --json", &out, &err), 0) << out;
  EXPECT_EQ(failing_findings(out), "");
  EXPECT_EQ(warning_kinds(Json::parse(out)).count("missing-preprocessor-config"), 0u) << out;
  EXPECT_EQ(run_cli("verify " + q(t.path / "q") + " --against " + q(src), &out, &err), 0) << out;
  // A text-only source takes no processor (a note), and a reference without one is refused.
  ASSERT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(t.path / "l") + " -j 2 --processor-from " + q(ref) +
                        " --json", &out, &err), 0) << err;
  EXPECT_TRUE(Json::parse(out)["preflight"]["serving_files"].empty());
  EXPECT_NE(out.find("the source is not multimodal"), std::string::npos);
  EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q2") + " --processor-from " + q(kData + "/llama"), &out,
                    &err), 3);
  EXPECT_NE(err.find("--processor-from '"), std::string::npos) << err;
  EXPECT_NE(err.find("holds no processor file"), std::string::npos) << err;
  expect_nothing_written(t.path / "q2");
}

// A processor taken from a reference is checked against the source's vision_config like doctor checks one.
TEST(QuantizePreflight, AProcessorOfAnotherModelIsRefused) {
  TempDir t;
  const auto src = copy_fixture("gemma4-moe-mm", t.path / "g");
  fsys::remove(src / "processor_config.json");
  const auto ref = copy_fixture("gemma4-moe-mm", t.path / "ref");
  edit_json(ref / "processor_config.json", [](Json& p) { p["image_processor"]["patch_size"] = 14; });
  std::string out, err;
  EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " --processor-from " + q(ref), &out, &err), 3);
  EXPECT_NE(err.find("preflight: processor-mismatch in "), std::string::npos) << err;
  // Blamed on the reference that supplied the file, with that fix (issue 55 tryout L: "copy the sizes from
  // vision_config" for another model's file).
  EXPECT_NE(err.find("(taken by --processor-from from '" + (ref / "processor_config.json").string() + "')"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("fix: --processor-from supplies a file that does not fit this model"), std::string::npos) << err;
  expect_nothing_written(t.path / "q");
}

TEST(QuantizePreflight, MissingTokenizerIsRefusedThenTakenFromAReference) {
  TempDir t;
  const auto src = copy_fixture("llama", t.path / "m");
  remove_tokenizer(src);
  std::string out, err;
  EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " -j 2", &out, &err), 3) << err;
  EXPECT_NE(err.find("preflight: missing-tokenizer in "), std::string::npos) << err;
  EXPECT_NE(err.find("fix: --tokenizer-from REF"), std::string::npos) << err;
  expect_nothing_written(t.path / "q");

  const std::string ref = kData + "/tokenizer";  // a tokenizer-only folder (transformers' save_pretrained)
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " -j 2 --tokenizer-from " + q(ref), &out, &err), 0)
      << err;
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}) {
    EXPECT_EQ(slurp(t.path / "q" / f), slurp(ref + "/" + f)) << f;
    EXPECT_NE(out.find(std::string("took ") + f + " from "), std::string::npos) << out;
  }
  EXPECT_FALSE(fsys::exists(t.path / "q" / "made.json"));  // only tokenizer files are taken
  EXPECT_EQ(run_cli("doctor " + q(t.path / "q"), &out, &err), 0) << out;
  EXPECT_EQ(run_cli("verify " + q(t.path / "q") + " --against " + q(src), &out, &err), 0) << out;
  // A reference with no tokenizer is refused before anything is written.
  EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q2") + " --tokenizer-from " + q(t.path / "q2-none"), &out,
                    &err), 4) << err;  // no such folder: an I/O error like any missing checkpoint argument
  fsys::create_directories(t.path / "empty");
  EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q2") + " --tokenizer-from " + q(t.path / "empty"), &out,
                    &err), 3) << err;
  EXPECT_NE(err.find("holds no tokenizer file"), std::string::npos) << err;
  expect_nothing_written(t.path / "q2");
}

// A source with its own tokenizer takes only a missing chat template: vocabularies are never mixed.
TEST(QuantizePreflight, ASourceWithItsOwnTokenizerTakesOnlyTheChatTemplate) {
  TempDir t;
  const auto src = copy_fixture("llama", t.path / "m");
  fsys::remove(src / "chat_template.jinja");
  const auto ref = copy_fixture("tokenizer", t.path / "ref");
  std::ofstream(ref / "tokenizer.json", std::ios::app) << " ";  // a different file: it must not be taken
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " -j 2 --tokenizer-from " + q(ref) + " --json", &out,
                    &err), 0) << err;
  const auto sv = Json::parse(out)["preflight"]["serving_files"];
  ASSERT_EQ(sv.size(), 1u) << sv.dump(1);
  EXPECT_EQ(sv[0]["file"], "chat_template.jinja");
  EXPECT_EQ(slurp(t.path / "q" / "tokenizer.json"), slurp(src / "tokenizer.json"));
  // Nothing to take: said in a note.
  ASSERT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(t.path / "q3") + " -j 2 --tokenizer-from " + q(ref) +
                        " --json", &out, &err), 0) << err;
  EXPECT_NE(out.find("nothing taken: the source has its own tokenizer"), std::string::npos) << out;
}

// A tokenizer whose ids the embedding has no row for is refused (doctor's tokenizer-vocab-size); fewer ids than
// rows (the fixtures: 48 ids, vocab_size 512) is fine.
TEST(QuantizePreflight, ATokenizerLargerThanTheEmbeddingIsRefused) {
  TempDir t;
  const auto src = copy_fixture("llama", t.path / "m");
  remove_tokenizer(src);
  const auto ref = copy_fixture("tokenizer", t.path / "ref");
  edit_json(ref / "tokenizer.json", [](Json& tj) {
    tj["added_tokens"].push_back({{"id", 700}, {"content", "<|extra|>"}, {"single_word", false}, {"lstrip", false},
                                  {"rstrip", false}, {"normalized", false}, {"special", true}});
  });
  std::string out, err;
  EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " --tokenizer-from " + q(ref), &out, &err), 3) << err;
  EXPECT_NE(err.find("preflight: tokenizer-vocab-size in "), std::string::npos) << err;
  EXPECT_NE(err.find("700 '<|extra|>'"), std::string::npos) << err;
  expect_nothing_written(t.path / "q");
  // doctor says the same of a folder holding that tokenizer.
  fsys::copy(ref / "tokenizer.json", src / "tokenizer.json");
  EXPECT_EQ(run_cli("doctor " + q(src), &out, &err), 1) << out;
  EXPECT_NE(out.find("tokenizer-vocab-size"), std::string::npos) << out;
  // The config's own multimodal placeholder id is not counted.
  edit_json(src / "config.json", [](Json& c) { c["image_token_id"] = 700; });
  EXPECT_EQ(run_cli("doctor " + q(src), &out, &err), 0) << out;
}

// A tokenizer that truncates (F35) is taken with doctor's fix applied in the output: truncation and padding null.
TEST(QuantizePreflight, TheOutputsTokenizerHasDoctorsTruncationFix) {
  TempDir t;
  const auto src = copy_fixture("llama", t.path / "m");
  edit_json(src / "tokenizer.json", [](Json& tj) {
    tj["truncation"] = {{"direction", "Right"}, {"max_length", 16}, {"strategy", "LongestFirst"}, {"stride", 0}};
  });
  const auto before = slurp(src / "tokenizer.json");
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " -j 2 --json", &out, &err), 0) << err;
  const auto sv = Json::parse(out)["preflight"]["serving_files"];
  ASSERT_EQ(sv.size(), 1u);
  EXPECT_EQ(sv[0]["action"], "fixed");
  EXPECT_EQ(sv[0]["kinds"][0], "tokenizer-truncation");
  EXPECT_NE(sv[0]["diff"].get<std::string>().find("+  \"truncation\": null"), std::string::npos) << sv[0]["diff"];
  EXPECT_TRUE(Json::parse(slurp(t.path / "q" / "tokenizer.json"))["truncation"].is_null());
  EXPECT_EQ(slurp(src / "tokenizer.json"), before);  // the source is never written
  // The warning whose fix the output gets is not printed as a preflight warning.
  EXPECT_EQ(err.find("preflight: tokenizer-truncation"), std::string::npos) << err;
  ASSERT_EQ(run_cli("doctor " + q(t.path / "q") + " --json", &out, &err), 0);
  EXPECT_EQ(warning_kinds(Json::parse(out)).count("tokenizer-truncation"), 0u) << out;
}

// Gemma-4's processor lives in processor_config.json; the output gets the preprocessor_config.json doctor --fix
// derives, byte for byte, and the text says so.
TEST(QuantizePreflight, PreprocessorConfigIsDerivedAsDoctorFixDerivesIt) {
  TempDir t;
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(kData + "/gemma4-moe-mm") + " " + q(t.path / "q") + " -j 2", &out, &err), 0) << err;
  EXPECT_NE(out.find("wrote preprocessor_config.json (new, derived from "), std::string::npos) << out;
  const auto fixed = copy_fixture("gemma4-moe-mm", t.path / "fixed");
  ASSERT_EQ(run_cli("doctor " + q(fixed) + " --fix", &out, &err), 0) << out;
  const std::string derived = slurp(t.path / "q" / "preprocessor_config.json");
  EXPECT_EQ(derived, slurp(fixed / "preprocessor_config.json"));
  EXPECT_EQ(derived.back(), '\n');
  // A dry run shows what it would write.
  ASSERT_EQ(run_cli("quantize " + q(kData + "/gemma4-moe-mm") + " --dry-run", &out, &err), 0) << err;
  EXPECT_NE(out.find("would write preprocessor_config.json"), std::string::npos) << out;
  EXPECT_NE(out.find("preflight: doctor's checks on the source: 0 error(s)"), std::string::npos) << out;
  // In the order it ran: the preflight before the plan, the verdict last (issue 55 tryout F).
  EXPECT_EQ(out.rfind("preflight: ", 0), 0u) << out;
  EXPECT_EQ(out.substr(out.size() - std::string("dry run: nothing written\n").size()), "dry run: nothing written\n");
}

// Warnings never refuse: a tokenizer without a chat template quantizes, with the warning printed first.
TEST(QuantizePreflight, WarningsDoNotRefuse) {
  TempDir t;
  const auto src = copy_fixture("llama", t.path / "m");
  fsys::remove(src / "chat_template.jinja");
  edit_json(src / "tokenizer_config.json", [](Json& c) { c.erase("chat_template"); });
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " -j 2 --json", &out, &err), 0) << err;
  EXPECT_NE(err.find("fp4forge: warning: preflight: missing-chat-template: "), std::string::npos) << err;
  const auto j = Json::parse(out);
  EXPECT_EQ(j["preflight"]["warnings"], 1);
  EXPECT_FALSE(j["preflight"]["refused"].get<bool>());
}

// The library enforces the preflight: quant::quantize refuses without the CLI, and says so through on_preflight.
TEST(QuantizePreflight, TheLibraryRefusesWithoutTheCli) {
  TempDir t;
  const auto src = gemma4_without_globals(t.path / "g");
  quant::QuantizeParams p;
  p.src = src;
  p.dst = t.path / "q";
  p.run.jobs = 2;
  std::size_t seen = 0;
  p.on_preflight = [&](const quant::Preflight& pre) { seen = pre.findings.size(); };
  auto r = quant::quantize(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
  EXPECT_NE(r.error().message.find("--no-preflight"), std::string::npos) << r.error().message;
  EXPECT_GT(seen, 0u);
  expect_nothing_written(t.path / "q");
  p.preflight.checks = false;
  ASSERT_TRUE(quant::quantize(p).ok());
}

// verify and inspect report a folder without a tokenizer as doctor does (one check); verify --tokenizer names where
// vLLM will read it from.
TEST(QuantizePreflight, VerifyAndInspectReportAMissingTokenizer) {
  TempDir t;
  std::string out, err;
  const auto qd = t.path / "q";
  ASSERT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(qd) + " -j 2", &out, &err), 0) << err;
  fsys::remove(qd / "chat_template.jinja");
  edit_json(qd / "tokenizer_config.json", [](Json& c) { c.erase("chat_template"); });
  ASSERT_EQ(run_cli("verify " + q(qd) + " --json", &out, &err), 0) << out;  // a warning does not fail
  EXPECT_EQ(warning_kinds(Json::parse(out)).count("missing-chat-template"), 1u) << out;
  remove_tokenizer(qd);
  EXPECT_EQ(run_cli("verify " + q(qd) + " --json", &out, &err), 1) << out;
  EXPECT_NE(failing_findings(out).find("missing-tokenizer: no tokenizer file"), std::string::npos) << out;
  EXPECT_EQ(run_cli("verify " + q(qd) + " --tokenizer " + q(kData + "/tokenizer"), &out, &err), 0) << out;
  EXPECT_EQ(run_cli("verify " + q(qd) + " --tokenizer " + q(qd / "config.json"), &out, &err), 2) << err;
  // inspect: informational (exit 0), the same finding in its report.
  ASSERT_EQ(run_cli("inspect " + q(qd) + " --json", &out, &err), 0);
  const auto j = Json::parse(out);
  ASSERT_EQ(j["findings"].size(), 1u) << j["findings"].dump(1);
  EXPECT_EQ(j["findings"][0]["kind"], "missing-tokenizer");
  EXPECT_EQ(j["findings"][0]["severity"], "error");
  ASSERT_EQ(run_cli("inspect " + q(qd), &out, &err), 0);
  EXPECT_NE(out.find("error    missing-tokenizer: "), std::string::npos) << out;
}

// inspect reports a tokenizer without a chat template as doctor does: a warning, exit 0.
TEST(QuantizePreflight, InspectWarnsOfAMissingChatTemplate) {
  TempDir t;
  const auto src = copy_fixture("llama", t.path / "m");
  fsys::remove(src / "chat_template.jinja");
  std::string out, err;
  ASSERT_EQ(run_cli("inspect " + q(src) + " --json", &out, &err), 0) << err;
  const auto j = Json::parse(out);
  ASSERT_EQ(j["findings"].size(), 1u) << j["findings"].dump(1);
  EXPECT_EQ(j["findings"][0]["kind"], "missing-chat-template");
  EXPECT_EQ(j["findings"][0]["severity"], "warning");
  ASSERT_EQ(run_cli("inspect " + q(src), &out, &err), 0);
  EXPECT_NE(out.find("warning  missing-chat-template: no chat template in the folder"), std::string::npos) << out;
  ASSERT_EQ(run_cli("inspect " + q(kData + "/llama") + " --json", &out, &err), 0);
  EXPECT_TRUE(Json::parse(out)["findings"].empty()) << out;  // a servable folder: nothing said
}

/** The CLI in `work` with HF_HUB_CACHE=`cache` (no other cache variable from the caller). */
int run_cli_cached(const fsys::path& cache, const std::string& args, std::string* out, std::string* err) {
  return run_cli_with("env -u HUGGINGFACE_HUB_CACHE -u HF_HOME HF_HUB_CACHE=" + q(cache), args, out, err);
}

// --tokenizer-from / --processor-from take a repo id of the Hugging Face cache (resolved offline like every checkpoint
// argument): the files land in the output as bytes (never links into the cache), the cache is never written, the
// vocabulary check runs on the cached tokenizer, and a repo the cache lacks is refused before anything is written.
TEST(QuantizePreflight, ReferencesAreTakenFromCachedRepoIds) {
  TempDir t;
  const fsys::path cache = t.path / "hub";
  const auto tok = make_fake_hub_repo(cache, "acme", "release-tok", kData + "/tokenizer", fake_commit(3));
  const auto rel = make_fake_hub_repo(cache, "acme", "gemma-release", kData + "/gemma4-moe-mm", fake_commit(4));
  const auto src = copy_fixture("gemma4-moe-mm", t.path / "g");
  fsys::remove(src / "processor_config.json");
  remove_tokenizer(src);
  const auto before = tree_state(cache);
  std::string out, err;
  EXPECT_EQ(run_cli_cached(cache, "quantize " + q(src) + " " + q(t.path / "q") + " -j 2", &out, &err), 3) << err;
  // Two errors: one line each, then the refusal with their count.
  EXPECT_EQ(lines_with(err, "\n"), 3u) << err;
  EXPECT_EQ(lines_with(err, "fp4forge: error: preflight: missing-processor in "), 1u) << err;
  EXPECT_EQ(lines_with(err, "fp4forge: error: preflight: missing-tokenizer in "), 1u) << err;
  EXPECT_NE(err.find("fp4forge: error: quantize refused by its preflight: doctor finds 2 error(s) in "),
            std::string::npos) << err;
  expect_nothing_written(t.path / "q");
  ASSERT_EQ(run_cli_cached(cache, "quantize " + q(src) + " " + q(t.path / "q") +
                                      " -j 2 --tokenizer-from acme/release-tok --processor-from acme/gemma-release --json",
                           &out, &err), 0) << err;
  const auto j = Json::parse(out)["preflight"];
  EXPECT_EQ(j["tokenizer_from"], tok.snapshot.string());
  EXPECT_EQ(j["processor_from"], rel.snapshot.string());
  std::set<std::string> taken;
  for (const auto& c : j["serving_files"])
    if (c["action"] == "taken") taken.insert(c["file"].get<std::string>() + " " + c["option"].get<std::string>());
  EXPECT_EQ(taken, (std::set<std::string>{"tokenizer.json --tokenizer-from", "tokenizer_config.json --tokenizer-from",
                                           "chat_template.jinja --tokenizer-from",
                                           "processor_config.json --processor-from"})) << j.dump(1);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}) {
    EXPECT_FALSE(fsys::is_symlink(t.path / "q" / f)) << f;
    EXPECT_EQ(slurp(t.path / "q" / f), slurp(kData + "/tokenizer/" + f)) << f;
  }
  EXPECT_FALSE(fsys::is_symlink(t.path / "q" / "processor_config.json"));
  EXPECT_EQ(slurp(t.path / "q" / "processor_config.json"), slurp(kData + "/gemma4-moe-mm/processor_config.json"));
  EXPECT_TRUE(fsys::exists(t.path / "q" / "preprocessor_config.json"));  // derived from the taken processor
  EXPECT_EQ(tree_state(cache), before);  // the cache is only read
  ASSERT_EQ(run_cli("doctor " + q(t.path / "q") + " --json", &out, &err), 0) << out;
  EXPECT_EQ(failing_findings(out), "");
  // The vocabulary check on a cached tokenizer with an id the embedding has no row for (a text-only source: for a
  // multimodal one the finding is a warning, its placeholders may sit there).
  const auto big = copy_fixture("tokenizer", t.path / "big");
  edit_json(big / "tokenizer.json", [](Json& tj) {
    tj["added_tokens"].push_back({{"id", 700}, {"content", "<|far|>"}, {"single_word", false}, {"lstrip", false},
                                  {"rstrip", false}, {"normalized", false}, {"special", true}});
  });
  make_fake_hub_repo(cache, "acme", "other-tok", big, fake_commit(5));
  const auto text = copy_fixture("llama", t.path / "l");
  remove_tokenizer(text);
  EXPECT_EQ(run_cli_cached(cache, "quantize " + q(text) + " " + q(t.path / "q2") + " --tokenizer-from acme/other-tok",
                           &out, &err), 3) << err;
  EXPECT_NE(err.find("preflight: tokenizer-vocab-size in "), std::string::npos) << err;
  EXPECT_NE(err.find("700 '<|far|>'"), std::string::npos) << err;
  expect_nothing_written(t.path / "q2");
  // A repo the cache does not hold: refused like any checkpoint argument (nothing downloaded, nothing written).
  EXPECT_EQ(run_cli_cached(cache, "quantize " + q(src) + " " + q(t.path / "q3") + " --tokenizer-from acme/absent", &out,
                           &err), 4);  // I/O, as for any checkpoint argument the cache lacks (docs/errors.md)
  EXPECT_NE(err.find("acme/absent"), std::string::npos) << err;
  expect_nothing_written(t.path / "q3");
  EXPECT_EQ(tree_state(cache).count("models--acme--absent"), 0u);
}

// --resume after a failed run: the preflight runs again, the kept shards are reused, and the serving files are
// written (again) before the commit: the output is a clean run's, byte for byte.
TEST(QuantizePreflight, ResumeAfterAFailedRunWritesTheServingFiles) {
  TempDir t;
  const auto src = copy_fixture("gemma4-moe-mm", t.path / "g");
  fsys::remove(src / "processor_config.json");
  quant::QuantizeParams p;
  p.src = src;
  p.run.jobs = 2;
  p.preflight.processor_from = kData + "/gemma4-moe-mm";
  p.dst = t.path / "clean";
  ASSERT_TRUE(quant::quantize(p).ok());
  const auto clean = file_contents(t.path / "clean");
  ASSERT_EQ(clean.count("preprocessor_config.json"), 1u);
  ASSERT_EQ(clean.count("processor_config.json"), 1u);
  // A run that fails at the commit, after every shard (and the serving files) reached the staging folder.
  p.dst = t.path / "q";
  p.run.before_commit = [](const fsys::path&) -> Status { return make_error(Errc::IO, "injected failure at commit"); };
  auto r = quant::quantize(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("injected failure at commit"), std::string::npos) << r.error().message;
  EXPECT_FALSE(fsys::exists(t.path / "q"));
  const fsys::path staging = t.path / ".q.fp4forge-staging";
  ASSERT_TRUE(fsys::exists(staging)) << "the finished shards are kept for --resume";
  // The CLI's --resume (the preflight with it) finishes it.
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " -j 2 --resume --processor-from " +
                        q(kData + "/gemma4-moe-mm") + " --json", &out, &err), 0) << err;
  const auto j = Json::parse(out);
  EXPECT_GT(j["shards_resumed"].get<int>(), 0) << out.substr(0, 600);
  // Its rate counts what it read, not the reused shards (issue 55).
  EXPECT_LT(j["bytes_read"].get<double>(), j["bytes_in"].get<double>()) << out.substr(0, 600);
  EXPECT_NEAR(j["gb_per_s"].get<double>(), j["bytes_read"].get<double>() / j["seconds"].get<double>() / 1e9,
              1e-9 + 1e-6 * j["gb_per_s"].get<double>());
  EXPECT_EQ(j["preflight"]["serving_files"].size(), 2u);
  EXPECT_TRUE(file_contents(t.path / "q") == clean) << "the resumed output differs from a clean run";
  EXPECT_FALSE(fsys::exists(staging));
}

}  // namespace
// A quantized source (an FP8_BLOCK release whose 320-wide MLP doctor rejects for serving as it is): the preflight
// says its count is of the source as quantize's input, not as doctor checks the release served (it read "0 error(s)"
// beside doctor's 2 on the same folder), and the output is clean.
TEST(QuantizePreflightSource, AQuantizedSourceIsCheckedAsQuantizesInputAndSaysSo) {
  TempDir t;
  std::string out, err;
  const std::string src = kData + "/fp8/ct-fp8-block";
  EXPECT_EQ(run_cli("doctor " + q(src), &out, &err), 1) << out;  // as served: FP8_BLOCK's whole blocks
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " --json", &out, &err), 0) << err;
  const auto j = nlohmann::json::parse(out);
  EXPECT_TRUE(j["preflight"]["quantized_source"].get<bool>()) << out;
  ASSERT_EQ(run_cli("quantize " + q(src) + " --dry-run", &out, &err), 0) << err;
  EXPECT_NE(out.find("preflight: doctor's checks on the source as quantize's input (its own quantization's serving "
                     "checks left out: quantize re-encodes its weights): 0 error(s)"), std::string::npos) << out;
  EXPECT_EQ(run_cli("doctor " + q(t.path / "q"), &out, &err), 0) << out;
  // A BF16 source's line is unchanged.
  ASSERT_EQ(run_cli("quantize " + q(kData + "/llama") + " --dry-run", &out, &err), 0) << err;
  EXPECT_NE(out.find("preflight: doctor's checks on the source: 0 error(s)"), std::string::npos) << out;
}

}  // namespace fp4forge

