// The one registry of finding kinds (core/finding_kinds.h) against the two tables that document it
// (docs/cli/doctor.md, docs/cli/verify.md) and against the checks that use it; and the one sink's merge and cap
// policy (core/finding_sink.h).
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "fp4forge/core/finding_kinds.h"
#include "fp4forge/core/finding_sink.h"

namespace fp4forge {
namespace {

namespace stdfs = std::filesystem;
const stdfs::path kRoot = stdfs::path(FP4FORGE_TEST_DATA) / "../..";

std::string read(const stdfs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/** A docs table of kinds: the rows of the "## Finding kinds" section, id -> cells after the id. */
std::map<std::string, std::vector<std::string>> kinds_table(const stdfs::path& doc) {
  std::map<std::string, std::vector<std::string>> rows;
  std::istringstream in(read(doc));
  std::string line;
  bool inside = false;
  const std::regex row(R"(^\| `([a-z0-9-]+)` \|(.*)$)");
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) inside = line.find("Finding kinds") != std::string::npos;
    std::smatch m;
    if (!inside || !std::regex_match(line, m, row)) continue;
    std::vector<std::string> cells;
    std::istringstream cs(m[2].str());
    std::string cell;
    while (std::getline(cs, cell, '|')) {
      const auto b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
      cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
    }
    rows.emplace(m[1].str(), std::move(cells));
  }
  return rows;
}

TEST(FindingKinds, RowsAreWellFormed) {
  std::set<std::string_view> ids;
  const std::regex kebab("[a-z0-9]+(-[a-z0-9]+)*");
  for (const auto& k : finding_kinds()) {
    EXPECT_TRUE(ids.insert(k.id).second) << "duplicate " << k.id;
    EXPECT_TRUE(std::regex_match(std::string(k.id), kebab)) << k.id;
    EXPECT_NE(k.commands, 0u) << k.id << " is documented by no command";
    EXPECT_FALSE(k.summary.empty()) << k.id;
    EXPECT_EQ(find_finding_kind(k.id), &k);
  }
  EXPECT_EQ(find_finding_kind("no-such-kind"), nullptr);
  // Looked up when compiled: the same row as at run time.
  static_assert(finding_kind("router-quantized").severity == Severity::ERROR);
  EXPECT_EQ(&finding_kind("tokenizer-truncation"), find_finding_kind("tokenizer-truncation"));
}

/** Each command's table lists exactly the rows marked for it, with the row's default severity first. */
void expect_table_matches(unsigned command, const stdfs::path& doc, std::size_t fix_column) {
  const auto rows = kinds_table(doc);
  ASSERT_GT(rows.size(), 25u) << doc;
  for (const auto& k : finding_kinds()) {
    if (!(k.commands & command)) continue;
    const auto it = rows.find(std::string(k.id));
    ASSERT_NE(it, rows.end()) << k.id << " has no row in " << doc.filename();
    ASSERT_FALSE(it->second.empty()) << k.id;
    const std::string& sev = it->second[0];
    EXPECT_EQ(sev.substr(0, sev.find_first_of(" /(")), severity_name(k.severity))
        << k.id << ": " << doc.filename() << " says '" << sev << "'";
    if (fix_column > 0) {
      ASSERT_GT(it->second.size(), fix_column) << k.id;
      EXPECT_EQ(it->second[fix_column] != "—", k.fixable) << k.id << ": fix column '" << it->second[fix_column] << "'";
    }
  }
  for (const auto& [id, cells] : rows) {
    const FindingKind* k = find_finding_kind(id);
    ASSERT_NE(k, nullptr) << id << " is documented in " << doc.filename() << " but not a registry row";
    EXPECT_TRUE(k->commands & command) << id << " is in " << doc.filename() << " but its row does not say so";
  }
}

TEST(FindingKinds, DoctorTableIsTheRegistry) { expect_table_matches(kInDoctor, kRoot / "docs/cli/doctor.md", 1); }
TEST(FindingKinds, VerifyTableIsTheRegistry) { expect_table_matches(kInVerify, kRoot / "docs/cli/verify.md", 0); }

/** The kinds a module's checks name (finding_kind("...")): each in the table of the command that reports it. */
TEST(FindingKinds, ChecksNameKindsOfTheirCommand) {
  const std::regex use(R"re(finding_kind\("([a-z0-9-]+)"\))re");
  const std::pair<const char*, unsigned> dirs[] = {{"src/verify", kInVerify}, {"src/diagnose", kInDoctor}};
  for (const auto& [dir, command] : dirs) {
    std::size_t seen = 0;
    for (const auto& e : stdfs::directory_iterator(kRoot / dir)) {
      if (e.path().extension() != ".cc") continue;
      const std::string src = read(e.path());
      for (auto it = std::sregex_iterator(src.begin(), src.end(), use); it != std::sregex_iterator(); ++it) {
        ++seen;
        const FindingKind* k = find_finding_kind((*it)[1].str());
        ASSERT_NE(k, nullptr) << (*it)[1];
        EXPECT_TRUE(k->commands & command) << (*it)[1] << " is reported by " << dir << " but not documented there";
      }
    }
    EXPECT_GE(seen, 25u) << dir;  // the scan found the checks (a sanity floor, not a count)
  }
}

// ---- the one sink ------------------------------------------------------------------------------------------

TEST(FindingSink, BuildsFromTheRowWithItsDefaultSeverity) {
  FindingSink sink;
  sink.add(finding_kind("quant-config-status"), {.message = "m", .key = "k", .expected = "e", .actual = "a"});
  sink.add(finding_kind("router-quantized"), {.severity = Severity::WARNING, .message = "w"});
  const auto fs = sink.take();
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].kind, "quant-config-status");
  EXPECT_EQ(fs[0].severity, Severity::WARNING);  // the row's default
  EXPECT_EQ(fs[0].key, "k");
  EXPECT_EQ(fs[0].expected, "e");
  EXPECT_EQ(fs[0].actual, "a");
  EXPECT_EQ(fs[1].kind, "router-quantized");
  EXPECT_EQ(fs[1].severity, Severity::WARNING);  // said otherwise by the check
  EXPECT_TRUE(sink.empty());
}

TEST(FindingSink, MergesOneKindSeverityAndGroupWithOneWording) {
  FindingSink sink;
  for (const char* t : {"b.2", "b.1", "b.1"})
    sink.add(finding_kind("router-quantized"), {.group = "layers.*.mlp.gate", .message = std::string("first ") + t,
                                                .tensors = {t}});
  sink.add(finding_kind("router-quantized"), {.group = "other", .message = "other", .tensors = {"c"}});
  sink.add(finding_kind("router-quantized"),
           {.severity = Severity::WARNING, .group = "layers.*.mlp.gate", .message = "warned", .tensors = {"d"}});
  const auto fs = sink.take();
  ASSERT_EQ(fs.size(), 3u);
  EXPECT_EQ(fs[0].message, "first b.2 (and 2 more like it in layers.*.mlp.gate)");
  EXPECT_EQ(fs[0].tensors, (std::vector<std::string>{"b.1", "b.2"}));  // sorted, each once
  EXPECT_EQ(fs[1].message, "other");
  EXPECT_EQ(fs[2].message, "warned");
}

TEST(FindingSink, AnEmptyGroupIsNeverMerged) {
  FindingSink sink;
  sink.add(finding_kind("quant-config-invalid"), {.message = "one"});
  sink.add(finding_kind("quant-config-invalid"), {.message = "two"});
  const auto fs = sink.take();
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].message, "one");
  EXPECT_EQ(fs[1].message, "two");
}

TEST(FindingSink, CapsEveryListWithOneWording) {
  FindingSink sink(3);
  std::vector<std::string> names;
  for (int i = 0; i < 5; ++i) names.push_back("t" + std::to_string(i));
  sink.add(finding_kind("fp8-without-config"), {.message = "m", .tensors = names});
  Finding built;
  built.kind = "missing-tensor";
  built.message = "built";
  built.tensors = names;
  sink.add(built);
  const auto fs = sink.take();
  ASSERT_EQ(fs.size(), 2u);
  for (const auto& f : fs) {
    EXPECT_EQ(f.tensors, (std::vector<std::string>{"t0", "t1", "t2"}));
    EXPECT_NE(f.message.find(" [5 tensors, first 3 listed]"), std::string::npos) << f.message;
  }
}

TEST(FindingSink, ErrorsFirstThenWarningsThenInfoInTheOrderAdded) {
  FindingSink sink;
  sink.add(finding_kind("no-weights"), {.message = "i1"});
  sink.add(finding_kind("quant-config-status"), {.message = "w1"});
  sink.add(finding_kind("router-quantized"), {.message = "e1"});
  sink.add(finding_kind("quant-config-multi-group"), {.message = "w2"});
  sink.add(finding_kind("leftover-weight"), {.message = "e2"});
  std::vector<std::string> order;
  for (const auto& f : sink.take()) order.push_back(f.message);
  EXPECT_EQ(order, (std::vector<std::string>{"e1", "e2", "w1", "w2", "i1"}));
}

}  // namespace
}  // namespace fp4forge
