#include "fp4forge/util/udiff.h"

#include <string>

#include <gtest/gtest.h>

using fp4forge::util::diff_stat;
using fp4forge::util::unified_diff;
using fp4forge::util::UdiffOptions;

TEST(Udiff, IdenticalIsEmpty) { EXPECT_EQ(unified_diff("a\nb\n", "a\nb\n", "x", "y"), ""); }

TEST(Udiff, SingleLineChange) {
  EXPECT_EQ(unified_diff("a\nb\n", "a\nc\n", "old", "new"),
            "--- old\n+++ new\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n");
}

TEST(Udiff, ContextAndSeparateHunks) {
  std::string a, b;
  for (int i = 1; i <= 20; ++i) {
    a += std::to_string(i) + "\n";
    b += (i == 2 ? std::string("two") : i == 18 ? std::string("eighteen") : std::to_string(i)) + "\n";
  }
  EXPECT_EQ(unified_diff(a, b, "a", "b"),
            "--- a\n+++ b\n"
            "@@ -1,5 +1,5 @@\n 1\n-2\n+two\n 3\n 4\n 5\n"
            "@@ -15,6 +15,6 @@\n 15\n 16\n 17\n-18\n+eighteen\n 19\n 20\n");
}

TEST(Udiff, MergesNearbyChangesIntoOneHunk) {
  const std::string d = unified_diff("1\n2\n3\n4\n5\n6\n7\n8\n", "1\nX\n3\n4\n5\n6\nY\n8\n", "a", "b");
  EXPECT_EQ(d, "--- a\n+++ b\n@@ -1,8 +1,8 @@\n 1\n-2\n+X\n 3\n 4\n 5\n 6\n-7\n+Y\n 8\n");
}

TEST(Udiff, PureInsertionAndDeletion) {
  EXPECT_EQ(unified_diff("a\nb\n", "a\nnew\nb\n", "a", "b"), "--- a\n+++ b\n@@ -1,2 +1,3 @@\n a\n+new\n b\n");
  EXPECT_EQ(unified_diff("", "x\n", "a", "b"), "--- a\n+++ b\n@@ -0,0 +1 @@\n+x\n");
  EXPECT_EQ(unified_diff("x\n", "", "a", "b"), "--- a\n+++ b\n@@ -1 +0,0 @@\n-x\n");
  UdiffOptions zero;
  zero.context = 0;
  EXPECT_EQ(unified_diff("a\nb\n", "a\nnew\nb\n", "a", "b", zero), "--- a\n+++ b\n@@ -1,0 +2 @@\n+new\n");
}

TEST(Udiff, MissingFinalNewline) {
  EXPECT_EQ(unified_diff("a\nb", "a\nb\n", "a", "b"),
            "--- a\n+++ b\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n");
}

TEST(Udiff, MinimalEditsAndStat) {
  const auto s = diff_stat("a\nb\nc\nd\ne\n", "a\nc\nd\nX\ne\nf\n");
  EXPECT_EQ(s.removed, 1u);
  EXPECT_EQ(s.added, 2u);
}

TEST(Udiff, FallbackBeyondLimitIsStillACorrectDiff) {
  UdiffOptions o;
  o.max_edit_distance = 1;
  o.context = 0;
  EXPECT_EQ(unified_diff("p\na\nb\ns\n", "p\nc\nd\ns\n", "a", "b", o),
            "--- a\n+++ b\n@@ -2,2 +2,2 @@\n-a\n-b\n+c\n+d\n");
}
