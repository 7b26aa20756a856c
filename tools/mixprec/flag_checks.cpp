// flag_checks.cpp: flag-value helpers shared by the subcommands: comma lists and numeric
// bounds whose messages say what is expected in words ("must be >= 1, got 0").
#include <sstream>

#include "commands.h"

namespace mixprec::cli {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

CLI::Validator at_least(double min) {
  std::ostringstream bound;
  bound << min;
  return CLI::Validator(
      [min, b = bound.str()](std::string& value) -> std::string {
        double v = 0;
        std::istringstream in(value);
        if (!(in >> v)) return "expected a number >= " + b + ", got '" + value + "'";
        return v >= min ? std::string() : "must be >= " + b + ", got " + value;
      },
      ">=" + bound.str());
}

CLI::Validator positive() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        double v = 0;
        std::istringstream in(value);
        if (!(in >> v)) return "expected a number > 0, got '" + value + "'";
        return v > 0 ? std::string() : "must be > 0, got " + value;
      },
      ">0");
}

}  // namespace mixprec::cli
