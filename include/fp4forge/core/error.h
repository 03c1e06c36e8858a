#pragma once
/**
 * Errors and results for the fp4forge library.
 *
 * The library never throws across its API (std::bad_alloc aside): every fallible function returns
 * `Result<T>`. An `Error` carries an `Errc` (which maps 1:1 to the CLI exit code), a one-line message
 * of the form "what, where, expected vs actual; hint", and optional file / tensor fields for --json.
 *
 * Exit codes (docs/errors.md): 0 ok, 1 check failed, 2 usage, 3 bad input, 4 I/O, 5 internal.
 */
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace fp4forge {

/** Error category; the numeric value is the CLI exit code. */
enum class Errc : int {
  CHECK_FAILED = 1,  ///< a check ran and found an error-severity problem
  USAGE = 2,         ///< bad command line
  BAD_INPUT = 3,     ///< malformed or unsupported input file / config / data
  IO = 4,            ///< file-system or network failure
  INTERNAL = 5,      ///< a bug in fp4forge
};

/** Stable lower-case name of an Errc ("bad_input", ...), used in --json output. */
const char* errc_name(Errc c) noexcept;

struct Error {
  Errc code = Errc::INTERNAL;
  std::string message;  ///< one line: what, where, expected vs actual; hint
  std::string file;     ///< file involved, if any
  std::string tensor;   ///< tensor involved, if any

  /** The message, prefixed by file and tensor context when they are not already in it. */
  std::string describe() const;
  int exit_code() const noexcept { return static_cast<int>(code); }
};

/** Builds an Error with a fmt-formatted message. */
template <typename... Args>
Error make_error(Errc code, fmt::format_string<Args...> f, Args&&... args) {
  return Error{code, fmt::format(f, std::forward<Args>(args)...), {}, {}};
}

/** Either a value or an Error. Minimal std::expected stand-in (C++20). */
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT(implicit)
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT(implicit)

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const& { return std::get<1>(v_); }
  Error&& error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

/** Result for functions that return nothing. */
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), has_err_(true) {}  // NOLINT(implicit)
  bool ok() const noexcept { return !has_err_; }
  explicit operator bool() const noexcept { return ok(); }
  const Error& error() const& { return err_; }
  Error&& error() && { return std::move(err_); }

 private:
  Error err_;
  bool has_err_ = false;
};

using Status = Result<void>;

/** Adds file context to an error (keeps an existing file). */
inline Error with_file(Error e, const std::string& file) {
  if (e.file.empty()) e.file = file;
  return e;
}

}  // namespace fp4forge

/** Propagates an error from an expression returning Result<...>. */
#define FP4FORGE_TRY(expr)                                   \
  do {                                                       \
    auto&& fp4forge_try_r_ = (expr);                         \
    if (!fp4forge_try_r_.ok()) return fp4forge_try_r_.error(); \
  } while (0)

/** Evaluates a Result<T> expression, propagating its error, else assigns the value to `lhs`. */
#define FP4FORGE_ASSIGN_OR_RETURN(lhs, expr)                        \
  auto FP4FORGE_CONCAT_(fp4forge_r_, __LINE__) = (expr);            \
  if (!FP4FORGE_CONCAT_(fp4forge_r_, __LINE__).ok())                \
    return FP4FORGE_CONCAT_(fp4forge_r_, __LINE__).error();         \
  lhs = std::move(FP4FORGE_CONCAT_(fp4forge_r_, __LINE__)).value()
#define FP4FORGE_CONCAT_(a, b) FP4FORGE_CONCAT2_(a, b)
#define FP4FORGE_CONCAT2_(a, b) a##b

/** Cheap invariant that stays on in release builds; aborts with file:line. */
#define FP4FORGE_CHECK(cond)                                                              \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      ::fmt::print(stderr, "fp4forge: internal check failed: {} at {}:{}\n", #cond, __FILE__, \
                   __LINE__);                                                             \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)
