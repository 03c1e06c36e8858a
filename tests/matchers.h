#pragma once
// Exact-message matchers for Result<T> and Status (core/error.h): a refusal is checked by its code and its whole
// one-line message, never by a substring.
//   EXPECT_THAT(layout_shard(...), ResultIs(Errc::BAD_INPUT, "tensor 'x': name given twice ..."));
#include <string>

#include <gmock/gmock.h>

#include "fp4forge/core/error.h"

namespace fp4forge::testutil {

MATCHER_P2(ResultIs, code, message,
           std::string(negation ? "is not" : "is") + " an error " + std::string(errc_name(code)) + ": " +
               std::string(message)) {
  if (arg.ok()) {
    *result_listener << "is ok";
    return false;
  }
  const Error& e = arg.error();
  *result_listener << "is " << errc_name(e.code) << ": " << e.message;
  return e.code == code && e.message == std::string(message);
}

}  // namespace fp4forge::testutil
