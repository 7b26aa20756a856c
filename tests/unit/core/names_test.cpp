// names_test.cpp: "did you mean" (mixprec/core/names.h): a typo within a third of the word (at
// least 1, at most 3 edits, a transposition counting as one) is matched case-insensitively,
// a unique prefix is matched, and nothing is offered for a word that is far from every
// candidate or for empty input.
#include "mixprec/core/names.h"

#include <gtest/gtest.h>

namespace mixprec {
namespace {

TEST(Names, TyposPrefixesAndNothingForFarWords) {
  const std::vector<std::string> flags = {"--epochs", "--lr", "--batch-size", "--max-steps"};
  EXPECT_EQ(closest_name("--epoch", flags), "--epochs");        // one deletion
  EXPECT_EQ(closest_name("--epcohs", flags), "--epochs");       // one transposition
  EXPECT_EQ(closest_name("--BATCH-SIZE", flags), "--batch-size");  // case
  EXPECT_EQ(closest_name("--max", flags), "--max-steps");       // unique prefix
  EXPECT_EQ(closest_name("--zzzzzz", flags), "");
  EXPECT_EQ(closest_name("", flags), "");
  EXPECT_EQ(closest_name("fc1.wieght", {"conv1.weight", "fc1.weight", "fc1.bias"}), "fc1.weight");
  EXPECT_EQ(did_you_mean("fc1.wieght", {"fc1.weight"}), " (did you mean 'fc1.weight'?)");
  EXPECT_EQ(did_you_mean("resnet", {"mlp", "cnn"}), "");
  EXPECT_EQ(closest_name("x", {}), "");
}

}  // namespace
}  // namespace mixprec
