// util/json_get.h: the one home of typed reads from untrusted JSON. Never throw, never coerce a type.
#include <gtest/gtest.h>

#include "fp4forge/util/json_get.h"

namespace fp4forge {
namespace {

using Json = nlohmann::ordered_json;

TEST(JsonGet, EveryGetterTakesAnyValueWithoutThrowing) {
  const Json j = Json::parse(R"({"i": 4, "f": 4.0, "h": 4.5, "big": 18446744073709551615, "huge": 1e300,
                               "s": "4", "b": true, "fb": false, "n": null, "a": [1], "o": {"x": 1}})");
  EXPECT_EQ(int_of(j, "i"), 4);
  EXPECT_EQ(int_of(j, "f"), std::nullopt) << "a float is not an integer";
  EXPECT_EQ(int_of(j, "s"), std::nullopt) << "a string is not coerced";
  EXPECT_EQ(int_of(j, "big"), std::nullopt) << "beyond int64 is no count";
  EXPECT_EQ(int_of(j, "missing"), std::nullopt);
  EXPECT_EQ(int_of(Json::array({1}), "i"), std::nullopt);
  EXPECT_EQ(integral_of(j, "i"), 4);
  EXPECT_EQ(integral_of(j, "f"), 4) << "an integral float reads as Python's int() would";
  EXPECT_EQ(integral_of(j, "h"), std::nullopt);
  EXPECT_EQ(integral_of(j, "huge"), std::nullopt);
  EXPECT_EQ(integral_of(j, "s"), std::nullopt);
  EXPECT_TRUE(bool_of(j, "b"));
  EXPECT_FALSE(bool_of(j, "fb"));
  EXPECT_FALSE(bool_of(j, "i")) << "1 is not true";
  EXPECT_EQ(opt_bool_of(j, "fb"), false);
  EXPECT_EQ(opt_bool_of(j, "s"), std::nullopt);
  EXPECT_EQ(str_of(j, "s"), "4");
  EXPECT_EQ(str_of(j, "i"), "");
  EXPECT_EQ(str_of(Json(3), "s"), "");
  EXPECT_TRUE(has_non_null(j, "a"));
  EXPECT_FALSE(has_non_null(j, "n"));
  EXPECT_FALSE(has_non_null(j, "missing"));
  for (const char* k : {"i", "f", "h", "big", "huge", "s", "b", "fb", "n", "a", "o", "missing"})
    for (const Json& v : {j, Json(nullptr), Json("x"), Json::array()}) {
      (void)int_of(v, k), (void)integral_of(v, k), (void)opt_bool_of(v, k), (void)str_of(v, k);
      (void)bool_of(v, k), (void)has_non_null(v, k);
    }
}

}  // namespace
}  // namespace fp4forge
