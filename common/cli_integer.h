// IntegerIn(min, max): a CLI11 transform for an integer flag (`->transform(IntegerIn(1, 100))`)
// whose message says what was expected, e.g. "--warmup-runs: '0' is not an integer from 1 to
// 1000000", where CLI11's own PositiveNumber said "Value 0 not in range 0.000000 to
// 1.797693e+308". It reads the value in base 10 and hands CLI11 its plain decimal form, since
// CLI11 converts integers with base 0 ("010" would be 8, "0x10" 16). ParseFlags: one exit code for
// a bad flag. Header-only: each binary's main includes CLI11 anyway.
#ifndef CHRONOSERVE_COMMON_CLI_INTEGER_H_
#define CHRONOSERVE_COMMON_CLI_INTEGER_H_

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace chronoserve {

// When `value` is a base-10 integer in [min, max], rewrites it in plain decimal and returns "";
// else returns what was expected.
inline std::string NormalizeIntegerIn(std::string& value, int64_t min, int64_t max) {
  int64_t n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < min || n > max) {
    return absl::StrCat("'", value, "' is not an integer from ", min, " to ", max);
  }
  value = absl::StrCat(n);
  return "";
}

inline CLI::Validator IntegerIn(int64_t min, int64_t max) {
  return CLI::Validator([min, max](std::string& value) { return NormalizeIntegerIn(value, min, max); },
                        absl::StrCat("INT in [", min, " - ", max, "]"));
}

// Parses argv into `app`. nullopt: go on. Otherwise the process's exit code, CLI11 having printed
// what it had to: 0 after --help or --version, 2 after a bad flag's message (CLI11's own codes,
// 105 and up, differ by the kind of mistake). Every binary of the project exits this way:
//   if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
inline std::optional<int> ParseFlags(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return std::nullopt;
}

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_CLI_INTEGER_H_
