#pragma once
// The argument rules every command shares (round 4, class 5: numbers and arguments), applied once to the whole
// command table (main.cc) so that no option, present or added later, can miss them:
// - an option given an empty value is a usage error: `--recipe "$RECIPE"` with the variable unset must not run
//   without the recipe, nor `gateway rollback --to "$B"` restore the newest backup, nor `--svg ''` draw nothing
//   (R4-B22; every value an option takes is a path, a name, a number or a list, and none is meant empty);
// - a floating-point option takes finite numbers only: CLI11's Range is two comparisons, both false for NaN, so
//   `--timeout nan` passed and disabled every deadline of probe and gateway (R4-B13).
#include <CLI/CLI.hpp>

namespace fp4forge::cli {

/** CLI11 validator: an empty value is refused ("an empty value; ..."). */
const CLI::Validator& non_empty();

/** CLI11 validator: a value that is not a finite number (`nan`, `inf`, `1e999`, `abc`) is refused. */
const CLI::Validator& finite();

/** CLI11 validator: a number from `lo` to `hi`, said in the bounds' own shortest spelling ("expected 0.1 to 3600";
 * CLI11's Range printed "[0.100000 - 3600.000000]", issue 55 tryout E-9). */
CLI::Validator in_range(double lo, double hi);

/** non_empty() on every option of `app` and of its subcommands, at any depth, that takes a value, and finite() on
 * every one whose type is floating-point (CLI11's type name FLOAT). */
void apply_argument_rules(CLI::App& app);

}  // namespace fp4forge::cli
