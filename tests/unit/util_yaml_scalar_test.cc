// The one rule for writing a YAML string plain (util/yaml_scalar.h; round 4, R4-B12): every scalar a YAML 1.1
// reader (PyYAML, LiteLLM's loader) or a YAML 1.2 reader would retype is quoted.
#include <gtest/gtest.h>

#include "fp4forge/util/yaml_scalar.h"

namespace fp4forge::util {
namespace {

TEST(YamlScalar, EverythingAResolverRetypesIsQuoted) {
  for (const char* s : {
           // bools (YAML 1.1 and 1.2, any case) and the single letters of YAML 1.1
           "yes", "Yes", "YES", "no", "No", "on", "On", "OFF", "off", "true", "True", "FALSE", "y", "Y", "n", "N",
           // nulls
           "", "~", "null", "Null", "NULL",
           // ints: decimal, signs, octal (1.1 and 1.2), hex, binary, underscores, sexagesimal
           "7", "-7", "+7", "012", "0o17", "0x1F", "0X1f", "0b101", "1_000", "1:20", "190:20:30",
           // floats: plain, exponent, leading dot, infinities and NaN
           "1.5", "-1.5", "1e3", "6.8523015e+5", ".5", ".inf", "-.inf", "+.INF", ".nan", ".NaN", "inf", "NaN",
           // dates and timestamps
           "2024-01-01", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5",
           // YAML syntax
           "a: b", "a:", "#x", "- x", "x #y", "[x]", "{x}", "&a", "*a", "!t", "|", ">", "%x", "@x", "`x", "'x", "\"x",
           "=", "<<", "a b", "a\nb", "a\tb", " lead", "trail ", "-", "?", ",x"})
    EXPECT_FALSE(yaml_plain_safe(s)) << "'" << s << "' would be written plain";
}

TEST(YamlScalar, NamesAndUrlsStayPlain) {
  for (const char* s : {"demo", "Qwen3-8B", "org/model-NVFP4A16", "hosted_vllm/chat", "http://localhost:8000/v1",
                        "vllm/vllm-openai:v0.33.0", "/models/chat:ro", "unless-stopped", "yesno", "nope", "only",
                        "_x", "a.b", "x@y", "a+b", "v1.5", "nvidia"})
    EXPECT_TRUE(yaml_plain_safe(s)) << "'" << s << "' is quoted needlessly";
}

}  // namespace
}  // namespace fp4forge::util
