#pragma once
/**
 * Rendering of gateway results for the CLI: the stable --json documents (schema in docs/cli/gateway.md),
 * the human-readable text and the exit code. No logic beyond formatting.
 */
#include <string>

#include <nlohmann/json.hpp>

#include "fp4forge/gateway/gateway.h"

namespace fp4forge::gateway {

/** {"ok", "config", "routes": [...], "retired": [...], "backend", "backend_aliases", "warnings"} */
nlohmann::ordered_json to_json(const GatewayShow& s);
/** One line per route, then retired aliases and the --backend answer. */
std::string to_text(const GatewayShow& s);
/** {"ok", "command", "config", "changed", "refused", "backup", "diff", "warnings", "probe", "next_steps"} */
nlohmann::ordered_json to_json(const EditResult& e);
/** The probe's lines (swap), then the diff and what was written, or why the edit was refused. */
std::string to_text(const EditResult& e);
/** 0 written (or nothing to do), 1 refused by a check, 4 refused because the backend was unreachable. */
int exit_code(const EditResult& e);
/** {"ok", "command": "check", "config", "alias", "warnings", "served", "stale", "probe"} */
nlohmann::ordered_json to_json(const CheckReport& c);
/** The gateway and alias, then the probe's lines. */
std::string to_text(const CheckReport& c);
/** 0 every check passed, 1 a check failed or the alias answered from a backend the file does not name, 4 the
 * gateway was unreachable. */
int exit_code(const CheckReport& c);

}  // namespace fp4forge::gateway
