// Every finding kind verify emits (any room of src/verify/) has its row in docs/cli/verify.md.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace fp4forge {
namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(VerifyKinds, EveryEmittedKindIsDocumented) {
  const std::filesystem::path root = std::filesystem::path(FP4FORGE_TEST_DATA) / "../..";
  std::string src;
  for (const auto& e : std::filesystem::directory_iterator(root / "src/verify"))
    if (e.path().extension() == ".cc") src += read(e.path());
  const std::string doc = read(root / "docs/cli/verify.md");
  ASSERT_FALSE(src.empty());
  ASSERT_FALSE(doc.empty());
  // sink.add({"kind", ...}) and the ternaries of a kind chosen at run time.
  const std::regex add(R"re(sink\.add\(\{"([a-z0-9-]+)")re");
  std::set<std::string> kinds;
  for (auto it = std::sregex_iterator(src.begin(), src.end(), add); it != std::sregex_iterator(); ++it)
    kinds.insert((*it)[1]);
  EXPECT_GT(kinds.size(), 30u);
  for (const auto& k : kinds)
    EXPECT_NE(doc.find("| `" + k + "` |"), std::string::npos) << k << " is not in docs/cli/verify.md";
}

}  // namespace
}  // namespace fp4forge
