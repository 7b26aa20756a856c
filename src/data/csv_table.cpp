// csv_table.cpp: a CSV file of numbers and a label column as a table, and a table as a
// dataset (data.h). The parser reads RFC 4180 fields (quotes for commas and "") from memory,
// one row at a time, so its cost is linear in the text and its memory the table's.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include <fmt/format.h>

#include "io/json_limits.h"
#include "mixprec/data/data.h"
#include "mixprec/io/files.h"
#include "mixprec/core/names.h"

namespace mixprec {
namespace {

constexpr size_t kMaxColumns = 65536;

// Splits one line into fields. "" when well formed, else what is wrong.
std::string split_fields(std::string_view line, std::vector<std::string>& fields) {
  fields.clear();
  std::string field;
  size_t i = 0;
  while (true) {
    field.clear();
    if (i < line.size() && line[i] == '"') {  // quoted: up to the closing quote, "" is a quote
      ++i;
      while (true) {
        if (i >= line.size()) return "a quoted field is not closed on its line";
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field += line[i++];
      }
      if (i < line.size() && line[i] != ',') return "text after a closing quote";
    } else {
      const size_t end = std::min(line.find(',', i), line.size());
      field.assign(line.substr(i, end - i));
      if (field.find('"') != std::string::npos) return "a quote inside an unquoted field";
      i = end;
    }
    fields.push_back(field);
    if (fields.size() > kMaxColumns) return fmt::format("more than {} columns", kMaxColumns);
    if (i >= line.size()) return "";
    ++i;  // the comma
    if (i == line.size()) {  // a trailing comma: one more, empty field
      fields.emplace_back();
      return "";
    }
  }
}

// A finite number filling the whole field (surrounding spaces allowed), or nullopt. The end
// is the field's size, not the first NUL: strtod stops at a NUL byte, and "1\0" "2" was read
// as 1.
std::optional<double> number(const std::string& field) {
  const char* begin = field.c_str();
  const char* const stop = field.c_str() + field.size();
  while (begin < stop && (*begin == ' ' || *begin == '\t')) ++begin;
  if (begin == stop || field.find('\0') != std::string::npos) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(begin, &end);
  while (end < stop && (*end == ' ' || *end == '\t')) ++end;
  if (end != stop || !std::isfinite(v) || errno == ERANGE) return std::nullopt;
  return v;
}

// A field as a message quotes it: at most 40 bytes, a NUL byte shown as \0 (printed raw, it
// would cut the message short on a terminal and in a log).
std::string quoted_field(const std::string& field) {
  std::string s;
  for (char c : field.substr(0, 40)) s += c == '\0' ? std::string("\\0") : std::string(1, c);
  return s;
}

std::string quoted_list(const std::vector<std::string>& names, size_t at_most = 12) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < at_most; ++i) s += (i ? ", " : "") + ("'" + names[i] + "'");
  if (names.size() > at_most) s += fmt::format(", ... ({} in all)", names.size());
  return s;
}

// What is wrong with one data row ("" when nothing): its field count, a text with a NUL
// byte (byte 0 pads token sequences), a feature that is not a finite float32, a label that is
// not UTF-8 (labels may become recorded class names).
std::string check_row(const std::vector<std::string>& fields, const std::vector<std::string>& header, int64_t row,
                      const std::string& source, const std::vector<size_t>& feature_at, int64_t text_at,
                      int64_t label_at) {
  if (fields.size() != header.size())
    return fmt::format("{}: row {} has {} fields, the header has {}", source, row, fields.size(), header.size());
  if (text_at >= 0 && fields[size_t(text_at)].find('\0') != std::string::npos)
    return fmt::format("{}: row {}, column '{}': the text holds a NUL byte", source, row, header[size_t(text_at)]);
  for (size_t k : feature_at) {
    if (const size_t nul = fields[k].find('\0'); nul != std::string::npos)
      return fmt::format("{}: row {}, column '{}': '{}' holds a NUL byte (at byte {} of the field), expected a "
                         "finite number", source, row, header[k], quoted_field(fields[k]), nul + 1);
    const auto v = number(fields[k]);
    if (!v)
      return fmt::format("{}: row {}, column '{}': '{}' is not a finite number", source, row, header[k],
                         quoted_field(fields[k]));
    if (std::fabs(*v) > 3.0e38)
      return fmt::format("{}: row {}, column '{}': {} is outside float32's range", source, row, header[k],
                         fields[k].substr(0, 40));
  }
  // A NUL in a label is a damaged file, not a class name ("1\0" "2" beside numeric labels
  // would turn every label into a name).
  if (label_at >= 0 && fields[size_t(label_at)].find('\0') != std::string::npos)
    return fmt::format("{}: row {}, column '{}': the label '{}' holds a NUL byte", source, row,
                       header[size_t(label_at)], quoted_field(fields[size_t(label_at)]));
  if (label_at >= 0 && !io::is_valid_utf8(fields[size_t(label_at)]))
    return fmt::format("{}: row {}, column '{}': the label is not UTF-8 text", source, row, header[size_t(label_at)]);
  return "";
}

}  // namespace

std::string BadSamples::summary() const {
  if (count == 0) return "";
  return fmt::format("; {} bad sample{} skipped (first: {})", count, count == 1 ? "" : "s", first);
}

StatusOr<CsvTable> parse_csv_table(std::string_view text, const std::string& source, const std::string& label_column,
                                   const std::vector<std::string>& feature_names, const std::string& text_column,
                                   BadSamples* bad) {
  CsvTable t;
  std::vector<std::string> header, fields;
  std::vector<size_t> feature_at;  // column index of each feature
  size_t label_at = 0, text_at = 0, pos = 0;
  int64_t row = 0;
  bool have_header = false;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++row;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (std::string why = split_fields(line, fields); !why.empty())
      return Status::data_loss(fmt::format("{}: row {}: {}", source, row, why));
    if (!have_header) {
      have_header = true;
      header = fields;
      for (const std::string& h : header)  // column names are recorded in config.json
        if (!io::is_valid_utf8(h))
          return Status::data_loss(fmt::format("{}: row 1 (the header): a column name is not UTF-8 text", source));
      std::set<std::string> seen;
      for (const std::string& h : header)
        if (!seen.insert(h).second)
          return Status::data_loss(fmt::format("{}: row 1 (the header): column '{}' appears twice", source, h));
      if (!label_column.empty()) {
        auto it = std::find(header.begin(), header.end(), label_column);
        if (it == header.end())
          return Status::invalid_argument(fmt::format("{}: no column '{}' for the labels{}; the header has {}",
                                                      source, label_column, did_you_mean(label_column, header),
                                                      quoted_list(header)));
        label_at = size_t(it - header.begin());
      }
      if (!text_column.empty()) {  // a text to classify: that column only
        auto it = std::find(header.begin(), header.end(), text_column);
        if (it == header.end())
          return Status::invalid_argument(fmt::format("{}: no column '{}' for the text{}; the header has {}", source,
                                                      text_column, did_you_mean(text_column, header),
                                                      quoted_list(header)));
        text_at = size_t(it - header.begin());
        if (!label_column.empty() && text_at == label_at)
          return Status::invalid_argument(
              fmt::format("{}: column '{}' cannot be both the text and the label", source, text_column));
        continue;
      }
      if (feature_names.empty()) {
        for (size_t c = 0; c < header.size(); ++c)
          if (label_column.empty() || c != label_at) {
            feature_at.push_back(c);
            t.feature_names.push_back(header[c]);
          }
      } else {
        for (const std::string& name : feature_names) {
          auto it = std::find(header.begin(), header.end(), name);
          if (it == header.end())
            return Status::data_loss(fmt::format("{}: no column '{}', which the model reads{}", source, name,
                                                 did_you_mean(name, header)));
          feature_at.push_back(size_t(it - header.begin()));
        }
        t.feature_names = feature_names;
      }
      if (feature_at.empty())
        return Status::data_loss(fmt::format("{}: no feature columns besides the label column '{}'", source,
                                             label_column));
      continue;
    }
    // A row is checked whole before anything of it is kept: --skip-bad leaves it out entirely.
    if (std::string why = check_row(fields, header, row, source, feature_at, text_column.empty() ? -1 : int64_t(text_at),
                                    label_column.empty() ? -1 : int64_t(label_at));
        !why.empty()) {
      if (bad == nullptr || !bad->skip) return Status::data_loss(why);
      bad->record(why);
      continue;
    }
    if (!text_column.empty()) t.texts.push_back(fields[text_at]);
    for (size_t k = 0; k < feature_at.size(); ++k) t.features.push_back(float(*number(fields[feature_at[k]])));
    if (!label_column.empty()) t.labels.push_back(fields[label_at]);
    t.line_of_row.push_back(row);
    ++t.rows;
  }
  if (!have_header) return Status::data_loss(source + ": empty (expected a header row, then rows of numbers)");
  if (t.rows == 0)
    return Status::data_loss(source + (bad != nullptr && bad->count > 0
                                           ? fmt::format(": no usable rows: --skip-bad left out all {} (first: {})",
                                                         bad->count, bad->first)
                                           : std::string(": a header but no data rows")));
  return t;
}

StatusOr<CsvTable> read_csv_table(const std::string& path, const std::string& label_column,
                                  const std::vector<std::string>& feature_names, const std::string& text_column,
                                  BadSamples* bad) {
  auto text = io::read_regular_file(path, "CSV file", uint64_t(kMaxDatasetBytes));
  if (!text.is_ok()) return text.status();
  return parse_csv_table(*text, path, label_column, feature_names, text_column, bad);
}

namespace {

// d.labels, d.class_names and d.num_classes from the table's label column (table_dataset).
Status assign_labels(const CsvTable& t, const std::string& source, const std::vector<std::string>& class_names,
                     int num_classes, ImageDataset& d) {
  if (int64_t(t.labels.size()) != t.rows)
    return Status::invalid_argument(source + ": a table without labels cannot be a training or test set");
  d.labels.resize(size_t(t.rows));
  // Integer labels 0..255 are class numbers, unless the classes are names.
  bool numeric = class_names.empty();
  int largest = -1;
  for (size_t i = 0; numeric && i < t.labels.size(); ++i) {
    const auto v = number(t.labels[i]);
    if (!v || *v < 0 || *v > 255 || *v != std::floor(*v)) numeric = false;
    else largest = std::max(largest, int(*v));
  }
  if (numeric) {
    d.num_classes = std::max(largest + 1, num_classes);
    for (size_t i = 0; i < t.labels.size(); ++i) {
      const int v = int(*number(t.labels[i]));
      if (num_classes > 0 && v >= num_classes)
        return Status::data_loss(fmt::format("{}: row {}: label {} is not one of the training set's classes 0..{}",
                                             source, t.line_of_row[i], v, num_classes - 1));
      d.labels[i] = uint8_t(v);
    }
  } else {
    std::vector<std::string> names = class_names;
    if (names.empty()) {
      names = t.labels;
      std::sort(names.begin(), names.end());
      names.erase(std::unique(names.begin(), names.end()), names.end());
      if (names.size() > 256)
        return Status::data_loss(fmt::format("{}: {} distinct labels, at most 256 classes", source, names.size()));
    }
    std::map<std::string, int> index;
    for (size_t i = 0; i < names.size(); ++i) index[names[i]] = int(i);
    for (size_t i = 0; i < t.labels.size(); ++i) {
      auto it = index.find(t.labels[i]);
      if (it == index.end())
        return Status::data_loss(fmt::format("{}: row {}: label '{}' is not one of the training set's classes ({})",
                                             source, t.line_of_row[i], t.labels[i].substr(0, 40), quoted_list(names)));
      d.labels[i] = uint8_t(it->second);
    }
    d.class_names = names;
    d.num_classes = int(names.size());
  }
  return Status::ok();
}

}  // namespace

StatusOr<ImageDataset> table_dataset(const CsvTable& t, const std::string& source,
                                     const std::vector<std::string>& class_names, int num_classes) {
  ImageDataset d;
  d.name = "csv";
  d.source = fmt::format("{} ({} rows of {} features)", source, t.rows, t.feature_names.size());
  d.tabular = true;
  d.count = t.rows;
  d.channels = int64_t(t.feature_names.size());
  d.height = d.width = 1;
  d.features = t.features;
  d.feature_names = t.feature_names;
  MIXPREC_RETURN_IF_ERROR(assign_labels(t, source, class_names, num_classes, d));
  compute_normalisation(d, d.mean, d.stddev);
  MIXPREC_RETURN_IF_ERROR(d.validate());
  return d;
}

StatusOr<ImageDataset> text_table_dataset(const CsvTable& t, const std::string& source, int64_t max_tokens,
                                          const std::vector<std::string>& class_names, int num_classes) {
  if (int64_t(t.texts.size()) != t.rows)
    return Status::invalid_argument(source + ": the table was not read with a text column");
  if (max_tokens < 1) return Status::invalid_argument(fmt::format("max_tokens {}: expected >= 1", max_tokens));
  ImageDataset d;
  d.name = "csv";
  d.tokens = true;
  d.count = t.rows;
  d.channels = d.height = 1;
  d.width = max_tokens;
  d.images.assign(size_t(t.rows * max_tokens), 0);
  int64_t cut = 0;
  for (int64_t i = 0; i < t.rows; ++i) {
    const std::string& text = t.texts[size_t(i)];
    const size_t n = std::min(text.size(), size_t(max_tokens));
    std::copy(text.begin(), text.begin() + std::ptrdiff_t(n), d.images.begin() + std::ptrdiff_t(i * max_tokens));
    cut += text.size() > n ? 1 : 0;
  }
  d.source = fmt::format("{} ({} texts of up to {} bytes{})", source, t.rows, max_tokens,
                         cut > 0 ? fmt::format("; {} longer ones cut", cut) : "");
  MIXPREC_RETURN_IF_ERROR(assign_labels(t, source, class_names, num_classes, d));
  MIXPREC_RETURN_IF_ERROR(d.validate());
  return d;
}

}  // namespace mixprec
