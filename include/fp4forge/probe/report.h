#pragma once
/**
 * Rendering of probe results for the CLI: the stable --json document (schema in docs/cli/probe.md),
 * the human-readable text and the exit code. No logic beyond formatting.
 */
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/probe/probe.h"

namespace fp4forge::probe {

/** {"ok", "url", "model", "unreachable", "summary": {pass, fail, skip}, "checks": [...]} */
nlohmann::ordered_json to_json(const ProbeReport& r);
/** One check's object in "checks" (also one line of `probe --json-lines`). */
nlohmann::ordered_json to_json(const CheckResult& c);
/** The header line, one line per check ("PASS  prose  ok  1.23s  detail"), then a summary line. */
std::string to_text(const ProbeReport& r);
/** The parts of to_text, for streaming: "probe URL model 'M'", one check's line, the summary line. */
std::string header_line(const ProbeReport& r);
std::string check_line(const CheckResult& c);
std::string summary_line(const ProbeReport& r);

/** Check lines as they stream, with checks that were not sent for one reason said once, on one line naming them
 * all ("SKIP  prose, long, ... (10)  not-run  not sent: ..."; issue 55: eleven FAIL lines for a server that is
 * down). add() returns the text to print now (a line held back until the next differs), finish() the rest. */
class CheckLines {
 public:
  std::string add(const CheckResult& c);
  std::string finish();

 private:
  std::vector<CheckResult> held_;  // not-sent skips with one detail, in order
};
/** 0 no check failed, 4 nothing could be reached, 1 otherwise. */
int exit_code(const ProbeReport& r);

}  // namespace fp4forge::probe
