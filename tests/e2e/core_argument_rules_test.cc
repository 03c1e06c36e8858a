// The argument rules every command shares (cli/validators.h; round 4, class 5), checked over the command table as
// the help prints it, so an option added later is covered without a new row:
// - every option that takes a value, and every positional, refuses an empty value with exit 2 naming the option
//   (R4-B22: `--recipe ''` ran without the recipe; `rollback --to ''` would restore the newest backup);
// - every FLOAT option refuses nan, NaN, -nan, inf and 1e999 with exit 2 (R4-B13: `--timeout nan` passed CLI11's
//   Range and disabled every deadline).
#include <algorithm>
#include <cctype>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace fp4forge {
namespace {

using testutil::run_cli;

struct Arg {
  std::string name;  ///< "--recipe", or a positional's name
  std::string type;  ///< "TEXT", "FLOAT", "UINT", ...
  bool positional = false;
};

/** The value-taking options and the positionals of `cmd` ("quantize", "gateway swap"), read from its help. */
std::vector<Arg> args_of(const std::string& cmd) {
  std::string out, err;
  EXPECT_EQ(run_cli(cmd + " --help", &out, &err), 0) << err;
  std::vector<Arg> args;
  std::istringstream in(out);
  std::string line, block;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ') {
      block = line;
      continue;
    }
    // "  --recipe TEXT   desc", "  -j,--jobs UINT:UINT in [0 - 1024]", "  src TEXT REQUIRED": the name, ONE space,
    // an upper-case type; a flag's description follows several spaces.
    static const std::regex re(R"(^  (\S+) ([A-Z]+)\b)");
    std::smatch m;
    if (!std::regex_search(line, m, re)) continue;
    const std::string first = m[1], type = m[2];
    if (block == "Positionals:") {
      args.push_back({first, type, true});
    } else if (block == "Options:" && first[0] == '-') {
      args.push_back({first.substr(first.rfind(',') + 1), type, false});
    }
  }
  return args;
}

/** The subcommands `cmd --help` lists ("" for the top level), `help` left out. */
std::vector<std::string> subcommands_of(const std::string& cmd) {
  std::string out, err;
  EXPECT_EQ(run_cli((cmd.empty() ? "" : cmd + " ") + "--help", &out, &err), 0) << err;
  std::vector<std::string> subs;
  std::istringstream in(out);
  std::string line;
  bool in_block = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ') {
      in_block = line == "Subcommands:";
      continue;
    }
    static const std::regex re(R"(^  ([a-z][a-z0-9-]*)  )");
    std::smatch m;
    if (in_block && std::regex_search(line, m, re) && m[1] != "help") subs.push_back(m[1]);
  }
  return subs;
}

/** The command paths, from the help: every command, and each subcommand of one that has them ("gateway swap"), so a
 * command added later is walked too. */
std::vector<std::string> command_paths() {
  std::vector<std::string> out;
  for (const std::string& cmd : subcommands_of("")) {
    const auto subs = subcommands_of(cmd);
    if (subs.empty()) out.push_back(cmd);
    for (const std::string& sub : subs) out.push_back(cmd + " " + sub);
  }
  return out;
}

/** `cmd` with `value` given to `a` (positionals before it given "x"). */
std::string with_value(const std::string& cmd, const std::vector<Arg>& all, const Arg& a, const std::string& value) {
  std::string line = cmd;
  if (!a.positional) return line + " " + a.name + " " + value;
  for (const Arg& p : all) {
    if (!p.positional) continue;
    if (p.name == a.name) return line + " " + value;
    line += " x";
  }
  return line;
}

TEST(ArgumentRules, TheWalkReadsEveryCommandFromTheHelp) {
  const auto paths = command_paths();
  for (const char* c : {"inspect", "doctor", "quantize", "verify", "diff", "plan", "probe", "synth", "selftest",
                        "gateway show", "gateway swap", "gateway add", "gateway rollback", "gateway retire",
                        "gateway check"})
    EXPECT_NE(std::find(paths.begin(), paths.end(), c), paths.end()) << c;
}

TEST(ArgumentRules, AnEmptyValueIsAUsageErrorForEveryOptionOfEveryCommand) {
  std::size_t checked = 0;
  for (const std::string& cmd : command_paths()) {
    const auto all = args_of(cmd);
    EXPECT_FALSE(all.empty()) << cmd;
    for (const Arg& a : all) {
      SCOPED_TRACE(cmd + " " + a.name);
      std::string out, err;
      EXPECT_EQ(run_cli(with_value(cmd, all, a, "''"), &out, &err), 2) << err;
      EXPECT_NE(err.find(a.name + ": an empty value"), std::string::npos) << err;
      EXPECT_EQ(err.find('\n'), err.size() - 1) << err;
      ++checked;
    }
  }
  EXPECT_GT(checked, 50u);  // the table's options, positionals included
}

TEST(ArgumentRules, EveryFloatOptionTakesFiniteNumbersOnly) {
  std::vector<std::string> floats;
  for (const std::string& cmd : command_paths()) {
    const auto all = args_of(cmd);
    for (const Arg& a : all) {
      if (a.type != "FLOAT") continue;
      floats.push_back(cmd + " " + a.name);
      for (const char* v : {"nan", "NaN", "-nan", "inf", "-inf", "1e999", "abc"}) {
        SCOPED_TRACE(cmd + " " + a.name + " " + v);
        std::string out, err;
        EXPECT_EQ(run_cli(with_value(cmd, all, a, v), &out, &err), 2) << err;
        EXPECT_NE(err.find(a.name + ": '" + v + "' is not a finite number"), std::string::npos) << err;
      }
    }
  }
  // probe --timeout / --deadline, gateway swap, add and check --timeout, verify --outlier-factor at least.
  EXPECT_GE(floats.size(), 6u);
  for (const char* f : {"probe --timeout", "probe --deadline", "gateway swap --timeout", "gateway add --timeout",
                        "gateway check --timeout", "verify --outlier-factor"})
    EXPECT_NE(std::find(floats.begin(), floats.end(), f), floats.end()) << f;
}

// R4-B13's reproduction: `--timeout nan` against a server that never answers was a hang; now a usage error before
// any connection (no server is needed to see it).
TEST(ArgumentRules, TimeoutNanNeverReachesTheNetwork) {
  for (const std::string args : {"probe http://127.0.0.1:9 --model m --checks models --timeout nan",
                                 "probe http://127.0.0.1:9 --model m --checks models --deadline NaN --json",
                                 "gateway check --config c.yaml --alias a --timeout -nan",
                                 "gateway swap --config c.yaml --alias a --backend-model m --api-base http://127.0.0.1:9/v1 "
                                 "--timeout nan",
                                 "gateway add --config c.yaml --alias a --backend-model m --api-base http://127.0.0.1:9/v1 "
                                 "--timeout nan"}) {
    std::string out, err;
    EXPECT_EQ(run_cli(args, &out, &err), 2) << args << ": " << err;
  }
}

// A number out of an option's range is said with the bounds as written, not CLI11's "[0.100000 - 3600.000000]"
// (issue 55 tryout E-9).
TEST(ArgumentRules, RangesAreSaidInTheBoundsOwnSpelling) {
  std::string out, err;
  EXPECT_EQ(run_cli("probe http://127.0.0.1:9 --model m --checks models --timeout 5000", &out, &err), 2) << err;
  EXPECT_NE(err.find("5000 is out of range; expected 0.1 to 3600"), std::string::npos) << err;
  EXPECT_EQ(err.find("000000"), std::string::npos) << err;
  EXPECT_EQ(run_cli("probe http://127.0.0.1:9 --model m --checks models --max-tokens 3", &out, &err), 2) << err;
  EXPECT_NE(err.find("3 is out of range; expected 16 to 1048576"), std::string::npos) << err;
}

}  // namespace
}  // namespace fp4forge
