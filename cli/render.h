#pragma once
// Shared CLI rendering: errors as one line on stderr (and a JSON object on stdout with --json),
// JSON documents, and the exit-code mapping. No logic lives here.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/core/error.h"
#include "fp4forge/core/finding.h"
#include "fp4forge/util/hf_cache.h"
#include "fp4forge/util/progress.h"

namespace fp4forge::cli {

/** Prints `fp4forge: error: <message>` to stderr; with json=true also `{"ok":false,"error":{...}}` on
 * stdout. Returns the exit code for the error. */
int report_error(const Error& e, bool json);

/** The JSON object for an error: {code, exit_code, message, file, tensor}. */
nlohmann::ordered_json error_json(const Error& e);

/** Pretty-prints a JSON document to stdout (indent 2, trailing newline). */
void print_json(const nlohmann::ordered_json& j);

/** A command's --json document with its schema tag, "fp4forge.COMMAND/1", after "ok" (one convention for every
 * command; inspect, plan and synth set their own in the library). A document that has one is returned as it is. */
nlohmann::ordered_json with_schema(const nlohmann::ordered_json& j, std::string_view command);

/** Prints a command's text report (`to_text` of its result) to stdout through util::printable_text (R4-B5): whatever
 * a file's names hold, no control byte but newline and tab reaches the terminal. On a terminal its prose lines are
 * wrapped at the terminal's width, at most 100 columns (util::wrap_prose; table rows kept whole); piped, each item
 * stays one line. */
void print_report(const std::string& text);

/** Prints an error line to stderr: `fp4forge: error: ...` (a refusal the report itself explains). */
void error_line(const std::string& message);

/** Prints a warning line to stderr: `fp4forge: warning: ...`. */
void warn(const std::string& message);

/** Prints a note to stderr: `fp4forge: note: ...` (what the command read, when it is not what was typed). */
void note(const std::string& message);

/** The one way a command takes a checkpoint argument: hf_cache::resolve() (a folder, or a Hugging Face
 * repo id found in the cache), its warnings printed, and in text mode a note naming the snapshot a repo id
 * resolved to (with --json the command's `hub` key carries it). Open `->path`. */
Result<hf_cache::Source> checkpoint_source(const std::string& arg, bool json);

/** True when stderr is a terminal (progress bars are drawn only then). */
bool stderr_is_tty();

/** The progress a long command hands the library as its ProgressSink, on stderr: a bar fitted to the width
 * when stderr is a terminal, else (a log, systemd, nohup) a status line every FP4FORGE_PROGRESS_SECONDS
 * (default 10; none for a shorter job); nullptr with --no-progress (the library then reports to nobody).
 * `json` does not change it: --json writes stdout. */
std::unique_ptr<Progress> progress_bar(bool json, bool no_progress);

/** The value of `--api-key-env VAR` ("" when `var` is empty); USAGE when VAR is unset or empty. */
Result<std::string> api_key_from_env(const std::string& var);

/** --allow KIND (verify, doctor): each warning of a listed kind becomes an info finding whose message says it was
 * allowed, so --strict passes it (a mixed-precision output's known multi-group warning, issue 55); an error is never
 * allowed. Findings stay ordered errors, warnings, info. Returns one note per listed kind that allowed nothing (no
 * warning of that kind; or only errors, which stay). */
std::vector<std::string> allow_warnings(std::vector<Finding>& findings, const std::vector<std::string>& kinds);

}  // namespace fp4forge::cli
