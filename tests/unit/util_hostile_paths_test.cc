// Issue 27: the one rule for files a user names (#5), backups that are links (#7), text that reaches a terminal
// (#14) and secrets by shape (#3), each from its reproduction.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "fp4forge/util/backup.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/redact.h"
#include "fp4forge/util/strings.h"
#include "temp_dir.h"

namespace fp4forge {
namespace {

namespace stdfs = std::filesystem;

using testutil::TempDir;

std::string slurp(const stdfs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// #5: `plan --svg PATH` renamed a regular file over whatever PATH was (a FIFO, a link, a device node).
TEST(WriteUserFile, LinksAndDirectoriesAreRefusedDevicesWrittenIntoFilesReplaced) {
  TempDir t;
  const stdfs::path victim = t.path / "victim.txt", link = t.path / "out.svg", file = t.path / "plain.svg";
  std::ofstream(victim) << "keep me";
  stdfs::create_symlink(victim, link);
  auto r = fs::write_user_file(link, "<svg/>");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
  EXPECT_NE(r.error().message.find("symbolic link"), std::string::npos) << r.error().message;
  EXPECT_TRUE(stdfs::is_symlink(link));
  EXPECT_EQ(slurp(victim), "keep me");
  EXPECT_FALSE(fs::write_user_file(t.path, "<svg/>").ok());  // a directory
  // A FIFO without a reader: an error at once, never a hang, and the FIFO stays a FIFO.
  const stdfs::path fifo = t.path / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto f = fs::write_user_file(fifo, "<svg/>");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("no reader"), std::string::npos) << f.error().message;
  EXPECT_TRUE(stdfs::is_fifo(fifo));
  // A character device named on purpose is written into, not renamed over.
  ASSERT_TRUE(fs::write_user_file("/dev/null", "<svg/>").ok());
  EXPECT_TRUE(stdfs::is_character_file("/dev/null"));
  // A regular file is replaced and keeps its mode; a new path is created.
  std::ofstream(file) << "old";
  ::chmod(file.c_str(), 0640);
  ASSERT_TRUE(fs::write_user_file(file, "<svg/>").ok());
  EXPECT_EQ(slurp(file), "<svg/>");
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  ASSERT_TRUE(fs::write_user_file(t.path / "new.svg", "<svg/>").ok());
  EXPECT_EQ(slurp(t.path / "new.svg"), "<svg/>");
}

// #7: a planted, future-dated backup that is a link to another file was restored by rollback.
TEST(Backups, LinksAreNeverBackups) {
  TempDir t;
  const stdfs::path cfg = t.path / "litellm.yaml", other = t.path / "someone-elses.yaml";
  std::ofstream(cfg) << "model_list: []\n";
  std::ofstream(other) << "secret: stuff\n";
  const std::string infix(backup::kBackupInfix);
  const stdfs::path planted = t.path / ("litellm.yaml" + infix + "29991231-235959");
  stdfs::create_symlink(other, planted);
  const stdfs::path real = t.path / ("litellm.yaml" + infix + "20260101-000000");
  std::ofstream(real) << "model_list: [a]\n";
  const auto list = backup::list(cfg, backup::kBackupInfix);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].filename(), real.filename());
}

// #14: control bytes, newlines and invalid UTF-8 from untrusted text never reach the terminal raw.
TEST(Printable, ControlBytesAndInvalidUtf8AreEscaped) {
  EXPECT_EQ(util::printable("repo\x1b[31mred\nnext"), "repo\\x1b[31mred\\x0anext");
  EXPECT_EQ(util::printable("caf\xc3\xa9 \xe2\x9c\x93"), "caf\xc3\xa9 \xe2\x9c\x93");  // valid UTF-8 stays
  EXPECT_EQ(util::printable("bad \xff\xc3 end"), "bad \\xff\\xc3 end");
  EXPECT_EQ(util::printable(std::string("nul\0x", 5)), "nul\\x00x");
}

// #3: secrets by shape.
TEST(Redact, SecretNamesAndShapes) {
  for (const char* n : {"api_key", "vertex_credentials", "Authorization", "x-api-token", "AWS_SECRET", "private_key"})
    EXPECT_TRUE(util::is_secret_name(n)) << n;
  for (const char* n : {"model", "api_base", "timeout", "rpm", "design"}) EXPECT_FALSE(util::is_secret_name(n)) << n;
  // Word by word (issue 55: secrets were masked inside ordinary words): a secret word in any word of the name,
  // camelCase and compounds included, but not an ordinary word that merely contains one.
  for (const char* n : {"apiKey", "x-api-key", "apikey", "master_key", "aws_secret_access_key", "AccessToken",
                        "refresh_token", "vertex_credentials", "passwordFile", "sig", "x_sig", "mykey", "auth_header"})
    EXPECT_TRUE(util::is_secret_name(n)) << n;
  for (const char* n : {"max_tokens", "maxTokens", "num_tokens", "tokenizer", "tokenizer_mode", "keyboard_layout",
                        "keywords", "author", "monkey_patch", "signal", "design_signature_count_x"})
    EXPECT_EQ(util::is_secret_name(n), std::string_view(n) == "design_signature_count_x") << n;
  // A secret word as a unit or a setting's subject (issue 55 audit: LiteLLM's cost keys were masked).
  for (const char* n : {"input_cost_per_token", "output_cost_per_token", "session_ttl", "token_limit", "key_expiry"})
    EXPECT_FALSE(util::is_secret_name(n)) << n;
  for (const char* n : {"session_token", "session_id", "per_token_key"}) EXPECT_TRUE(util::is_secret_name(n)) << n;
  EXPECT_EQ(util::redact_url("http://u:K3Y@10.0.0.5:8000/v1?key=Q&alt=1"), "http://u:***@10.0.0.5:8000/v1?key=***&alt=1");
}

}  // namespace
}  // namespace fp4forge
