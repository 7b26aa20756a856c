// csv_table_test.cpp: CSV tables (parse_csv_table, table_dataset) and their batches: values
// exactly as strtod reads them, RFC 4180 quotes, CRLF and blank lines; feature columns chosen
// by name in the training file's order; every malformed row an error naming the file, line
// and column; labels as numbers or as sorted names, a test split held to the training
// classes; per-column mean/std against a two-pass float64 sum written here; the loader's
// batches are (v - mean) / std per column.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mixprec/data/data.h"

namespace mixprec {
namespace {

std::string message_of(const std::string& text, const std::string& label = "label",
                       const std::vector<std::string>& features = {}) {
  auto t = parse_csv_table(text, "t.csv", label, features);
  return t.is_ok() ? "accepted" : t.status().message();
}

TEST(CsvTable, ValuesQuotesLineEndingsAndLineNumbers) {
  auto t = parse_csv_table("a,\"b, quoted\",label\r\n1.5,-2e3,cat\r\n\r\n 7 ,\"8\",\"dog \"\"x\"\"\"\r\n", "t.csv", "label");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->feature_names, (std::vector<std::string>{"a", "b, quoted"}));
  EXPECT_EQ(t->rows, 2);
  EXPECT_EQ(t->features, (std::vector<float>{1.5f, -2000.0f, 7.0f, 8.0f}));
  EXPECT_EQ(t->labels, (std::vector<std::string>{"cat", "dog \"x\""}));
  EXPECT_EQ(t->line_of_row, (std::vector<int64_t>{2, 4}));
}

TEST(CsvTable, FeatureColumnsAreFoundByNameInTheGivenOrder) {
  auto t = parse_csv_table("z,label,y,x\n1,0,2,3\n", "t.csv", "label", {"x", "z"});
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->features, (std::vector<float>{3.0f, 1.0f}));
  // predict: no label column at all.
  auto p = parse_csv_table("x,z\n5,6\n", "q.csv", "", {"z", "x"});
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_EQ(p->features, (std::vector<float>{6.0f, 5.0f}));
  EXPECT_TRUE(p->labels.empty());
  EXPECT_NE(message_of("x,label\n1,0\n", "label", {"x", "w"}).find("t.csv: no column 'w', which the model reads"),
            std::string::npos);
}

TEST(CsvTable, MalformedInputIsAnErrorNamingTheLineAndColumn) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a,b,label\n1,2,0\n3,1\n", "t.csv: row 3 has 2 fields, the header has 3"},
      {"a,label\nnan,0\n", "t.csv: row 2, column 'a': 'nan' is not a finite number"},
      {"a,label\n1e999,0\n", "row 2, column 'a': '1e999' is not a finite number"},
      {"a,label\n,0\n", "row 2, column 'a': '' is not a finite number"},
      {"a,label\n12abc,0\n", "'12abc' is not a finite number"},
      {"a,label\n1e39,0\n", "outside float32's range"},
      {"a,label\n\"1,0\n", "row 2: a quoted field is not closed on its line"},
      {"a,label\n\"1\"x,0\n", "row 2: text after a closing quote"},
      {"a,label\n1\"2,0\n", "row 2: a quote inside an unquoted field"},
      {"a,a,label\n1,2,0\n", "row 1 (the header): column 'a' appears twice"},
      {"a,b,label\n", "a header but no data rows"},
      {"", "empty (expected a header row"},
      {"label\n0\n", "no feature columns besides the label column 'label'"},
      {"a,lable\n1,0\n", "t.csv: no column 'label' for the labels (did you mean 'lable'?); the header has 'a', 'lable'"},
      {"a\xff,label\n1,0\n", "t.csv: row 1 (the header): a column name is not UTF-8 text"},
      {"a,label\n1,\xe1\x9c\n", "t.csv: row 2, column 'label': the label is not UTF-8 text"},
  };
  for (const auto& [text, want] : cases) {
    SCOPED_TRACE(text);
    EXPECT_NE(message_of(text).find(want), std::string::npos) << message_of(text);
  }
  auto missing_label = parse_csv_table("a,b\n1,2\n", "t.csv", "label");
  EXPECT_EQ(missing_label.status().code(), StatusCode::invalid_argument);
  auto ragged = parse_csv_table("a,label\n1\n", "t.csv", "label");
  EXPECT_EQ(ragged.status().code(), StatusCode::data_loss);
}

TEST(TableDataset, NumericOrNamedLabelsAndPerColumnStatistics) {
  auto t = parse_csv_table("x,y,label\n1,100,2\n2,300,0\n4,200,2\n", "t.csv", "label");
  ASSERT_TRUE(t.is_ok());
  auto d = table_dataset(*t, "t.csv");
  ASSERT_TRUE(d.is_ok()) << d.status().message();
  EXPECT_TRUE(d->tabular);
  EXPECT_EQ(d->channels, 2);
  EXPECT_EQ(d->height * d->width, 1);
  EXPECT_EQ(d->num_classes, 3);  // largest label + 1
  EXPECT_TRUE(d->class_names.empty());
  EXPECT_EQ(d->labels, (std::vector<uint8_t>{2, 0, 2}));
  // Two-pass float64 mean and population std per column.
  const double xs[] = {1, 2, 4}, ys[] = {100, 300, 200};
  for (int c = 0; c < 2; ++c) {
    const double* v = c == 0 ? xs : ys;
    const double m = (v[0] + v[1] + v[2]) / 3;
    const double sd = std::sqrt(((v[0] - m) * (v[0] - m) + (v[1] - m) * (v[1] - m) + (v[2] - m) * (v[2] - m)) / 3);
    EXPECT_DOUBLE_EQ(d->mean[size_t(c)], m);
    EXPECT_DOUBLE_EQ(d->stddev[size_t(c)], sd);
  }
  auto named = parse_csv_table("x,label\n1,dog\n2,cat\n3,dog\n", "n.csv", "label");
  auto nd = table_dataset(*named, "n.csv");
  ASSERT_TRUE(nd.is_ok());
  EXPECT_EQ(nd->class_names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(nd->labels, (std::vector<uint8_t>{1, 0, 1}));
  // A test split follows the training classes.
  auto test = parse_csv_table("x,label\n1,cat\n\n2,bird\n", "test.csv", "label");
  auto td = table_dataset(*test, "test.csv", nd->class_names, nd->num_classes);
  ASSERT_FALSE(td.is_ok());
  EXPECT_NE(td.status().message().find("test.csv: row 4: label 'bird' is not one of the training set's classes "
                                       "('cat', 'dog')"),
            std::string::npos)
      << td.status().message();
  auto numeric_test = parse_csv_table("x,label\n1,5\n", "test.csv", "label");
  EXPECT_FALSE(table_dataset(*numeric_test, "test.csv", {}, 3).is_ok());
}

TEST(TableDataset, TheLoaderNormalisesEachColumn) {
  auto t = parse_csv_table("x,y,label\n1,100,1\n2,300,0\n4,200,1\n", "t.csv", "label");
  auto d = table_dataset(*t, "t.csv");
  ASSERT_TRUE(d.is_ok());
  DataLoader loader(std::make_shared<const ImageDataset>(*d), DataLoaderOptions{.batch_size = 3, .shuffle = false});
  loader.set_epoch(0);
  auto b = loader.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->images.shape(), (std::vector<int64_t>{3, 2, 1, 1}));
  const std::vector<double> got = b->images.to_vector_f64();
  const double raw[3][2] = {{1, 100}, {2, 300}, {4, 200}};
  for (int i = 0; i < 3; ++i)
    for (int c = 0; c < 2; ++c)
      EXPECT_EQ(got[size_t(i * 2 + c)], double(float((raw[i][c] - d->mean[size_t(c)]) / d->stddev[size_t(c)])));
  EXPECT_EQ(b->labels.to_vector_f64(), (std::vector<double>{1, 0, 1}));
  // Splitting a table keeps it a table.
  auto parts = split_off(*d, 0.34);
  ASSERT_TRUE(parts.is_ok());
  EXPECT_TRUE(parts->first.tabular && parts->second.tabular);
  EXPECT_EQ(parts->first.features.size() + parts->second.features.size(), d->features.size());
  EXPECT_TRUE(parts->second.validate().is_ok());
}

TEST(CsvTable, ATextColumnIsReadAsTextAndNoColumnAsFeatures) {
  auto t = parse_csv_table("id,text,label\n1,\"hello, world\",greeting\n2,bye,farewell\n", "t.csv", "label", {},
                           "text");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->texts, (std::vector<std::string>{"hello, world", "bye"}));
  EXPECT_TRUE(t->features.empty());  // the id column is not read
  EXPECT_EQ(t->labels, (std::vector<std::string>{"greeting", "farewell"}));
  auto message = [](const std::string& text, const std::string& column) {
    auto r = parse_csv_table(text, "t.csv", "label", {}, column);
    return r.is_ok() ? std::string("accepted") : r.status().message();
  };
  EXPECT_NE(message("txt,label\na,b\n", "text").find("t.csv: no column 'text' for the text (did you mean 'txt'?)"),
            std::string::npos);
  EXPECT_NE(message("text,label\na,b\n", "label").find("column 'label' cannot be both the text and the label"),
            std::string::npos);
  EXPECT_NE(message(std::string("text,label\na\0b,x\n", 18), "text").find("row 2, column 'text': the text holds a NUL"),
            std::string::npos);
}

TEST(TextTableDataset, TextsBecomePaddedByteIdsAndTheLoaderGivesInt64) {
  auto t = parse_csv_table("text,label\nab,x\nhello,y\n,x\n", "t.csv", "label", {}, "text");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  auto d = text_table_dataset(*t, "t.csv", 4);
  ASSERT_TRUE(d.is_ok()) << d.status().message();
  EXPECT_TRUE(d->tokens);
  EXPECT_EQ(d->width, 4);
  // "ab" padded with 0s, "hello" cut to "hell", "" all padding.
  EXPECT_EQ(d->images, (std::vector<uint8_t>{'a', 'b', 0, 0, 'h', 'e', 'l', 'l', 0, 0, 0, 0}));
  EXPECT_EQ(d->labels, (std::vector<uint8_t>{0, 1, 0}));
  EXPECT_EQ(d->class_names, (std::vector<std::string>{"x", "y"}));
  EXPECT_NE(d->source.find("1 longer ones cut"), std::string::npos) << d->source;
  DataLoader loader(std::make_shared<ImageDataset>(*d), {.batch_size = 3, .shuffle = false, .normalize = false});
  const auto b = loader.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->images.dtype(), DType::i64);
  EXPECT_EQ(b->images.shape(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(b->images.to_vector_f64()[4], double('h'));
  EXPECT_EQ(b->labels.to_vector_f64(), (std::vector<double>{0, 1, 0}));
  // A test split is held to the training classes; a table read without a text column is refused.
  auto test = parse_csv_table("text,label\nq,z\n", "test.csv", "label", {}, "text");
  EXPECT_NE(text_table_dataset(*test, "test.csv", 4, d->class_names, d->num_classes).status().message().find(
                "label 'z' is not one of the training set's classes"),
            std::string::npos);
  auto numbers = parse_csv_table("a,label\n1,x\n", "n.csv", "label");
  EXPECT_FALSE(text_table_dataset(*numbers, "n.csv", 4).is_ok());
}

// A NUL byte inside a number: strtod stops at it, so "1\0" "2" was read as 1 (while "12abc"
// was refused). Refused naming the file, line and column, wherever the NUL is; skipped
// whole by --skip-bad; a NUL in a label is refused too (it is not a class name).
TEST(CsvTable, ANulByteInsideANumberOrLabelIsRefusedNamingLineAndColumn) {
  using namespace std::string_literals;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a,b,label\n3,4,0\n5,1\0002,1\n"s, "t.csv: row 3, column 'b': '1\\02' holds a NUL byte (at byte 2 of the field)"},
      {"a,label\n\0007,0\n"s, "t.csv: row 2, column 'a': '\\07' holds a NUL byte (at byte 1"},
      {"a,label\n7\000,0\n"s, "row 2, column 'a': '7\\0' holds a NUL byte (at byte 2"},
      {"a,label\n\"1\0002\",0\n"s, "row 2, column 'a': '1\\02' holds a NUL byte"},
      {"a,label\n1 \000,0\n"s, "row 2, column 'a'"},
      {"a,label\n1,0\0001\n"s, "t.csv: row 2, column 'label': the label '0\\01' holds a NUL byte"},
  };
  for (const auto& [text, want] : cases) {
    SCOPED_TRACE(text);
    auto t = parse_csv_table(text, "t.csv", "label");
    ASSERT_FALSE(t.is_ok()) << "accepted; first value " << (t->features.empty() ? -1.0f : t->features[0]);
    EXPECT_EQ(t.status().code(), StatusCode::data_loss);
    EXPECT_NE(t.status().message().find(want), std::string::npos) << t.status().message();
    // Printed raw, a NUL would cut the message short in a terminal or log.
    EXPECT_EQ(t.status().message().find('\0'), std::string::npos);
  }
  BadSamples bad{.skip = true};
  auto t = parse_csv_table("a,label\n1\0002,0\n3,1\n"s, "t.csv", "label", {}, "", &bad);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->features, (std::vector<float>{3.0f}));
  EXPECT_EQ(t->line_of_row, (std::vector<int64_t>{3}));
  EXPECT_EQ(bad.count, 1);
}

TEST(CsvTable, SkipBadLeavesOutBadRowsWhole) {
  BadSamples bad{.skip = true};
  auto t = parse_csv_table("a,b,label\n1,2,x\n3,oops,y\n4,5\n6,7,z\n8,1e39,x\n", "t.csv", "label", {}, "", &bad);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->rows, 2);
  EXPECT_EQ(t->features, (std::vector<float>{1, 2, 6, 7}));  // no half of a bad row kept
  EXPECT_EQ(t->labels, (std::vector<std::string>{"x", "z"}));
  EXPECT_EQ(t->line_of_row, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(bad.count, 3);
  EXPECT_EQ(bad.first, "t.csv: row 3, column 'b': 'oops' is not a finite number");
  BadSamples all{.skip = true};
  auto none = parse_csv_table("a,label\nx,1\n", "t.csv", "label", {}, "", &all);
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("t.csv: no usable rows: --skip-bad left out all 1 (first: t.csv: row 2"),
            std::string::npos)
      << none.status().message();
  // Problems with the file itself are never skipped.
  BadSamples header{.skip = true};
  EXPECT_FALSE(parse_csv_table("a,a,label\n1,2,x\n", "t.csv", "label", {}, "", &header).is_ok());
}

}  // namespace
}  // namespace mixprec
