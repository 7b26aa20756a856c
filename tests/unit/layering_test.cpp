// layering_test.cpp: the layer rule of docs/design.md, read from the sources. The order of the
// layers and the layer of each public header are read from design.md's own tables (section 1:
// "| layer | folder | owns |" and "| layer | public headers |"), so the doc and this test
// cannot drift: moving a row there changes what this test allows.
// - every #include "..." of src/ and include/ names a file of its own layer or of a layer
//   listed before it (a file's layer: its folder under src/, or the public-header table);
// - no include closes a circle between files (a header that reaches itself again);
// - every src/ folder and every public header has a row, and every row names something real.
// The checker is a function of (file, its lines) so that the cases below can also feed it a
// made-up tree and see it fail where it must.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
const fs::path kSource = MIXPREC_SOURCE_DIR;

std::vector<std::string> lines_of(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> cells_of(const std::string& row) {
  std::vector<std::string> cells;
  size_t pos = row.find('|');
  while (pos != std::string::npos) {
    const size_t next = row.find('|', pos + 1);
    if (next == std::string::npos) break;
    std::string c = row.substr(pos + 1, next - pos - 1);
    c.erase(0, c.find_first_not_of(' '));
    c.erase(c.find_last_not_of(' ') + 1);
    cells.push_back(c);
    pos = next;
  }
  return cells;
}

// The rows of the markdown table whose header row starts with `header` (cells after the
// header and the |---| line, up to the first line that is not a row).
std::vector<std::vector<std::string>> table_after(const std::vector<std::string>& doc, const std::string& header) {
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < doc.size(); ++i) {
    if (doc[i].rfind(header, 0) != 0) continue;
    for (size_t j = i + 2; j < doc.size() && doc[j].rfind("|", 0) == 0; ++j) rows.push_back(cells_of(doc[j]));
    break;
  }
  return rows;
}

struct Layers {
  std::vector<std::string> order;               // core first
  std::map<std::string, std::string> folder;    // src/ folder -> layer
  std::map<std::string, std::string> header;    // public header file name -> layer
  int rank(const std::string& layer) const {
    return int(std::find(order.begin(), order.end(), layer) - order.begin());
  }
};

Layers layers_from_design(const std::vector<std::string>& doc) {
  Layers l;
  const std::regex src_folder(R"(`src/([a-z_]+))");
  for (const auto& row : table_after(doc, "| layer | folder |")) {
    std::smatch m;
    if (row.size() < 2 || !std::regex_search(row[1], m, src_folder)) continue;  // cli, python: not in src/
    l.order.push_back(row[0]);
    l.folder[m[1]] = row[0];
  }
  const std::regex name(R"(`([a-z_0-9]+\.(?:h|def))`)");  // ops.def: the op list
  for (const auto& row : table_after(doc, "| layer | public headers |")) {
    if (row.size() < 2) continue;
    for (auto it = std::sregex_iterator(row[1].begin(), row[1].end(), name); it != std::sregex_iterator(); ++it) {
      const std::string h = (*it)[1];
      EXPECT_FALSE(l.header.count(h)) << "docs/design.md lists the public header " << h << " twice";
      l.header[h] = row[0];
    }
  }
  return l;
}

// One source file: its path from the checkout ("src/io/checkpoint.cpp", "include/mixprec/nn/nn.h")
// and its lines.
struct Source {
  std::string path;
  std::vector<std::string> lines;
};

std::optional<std::string> layer_of(const Layers& l, const std::string& path) {
  if (path.rfind("include/mixprec/", 0) == 0) {
    // include/mixprec/<layer>/<name>: the table gives the name's layer (the folder is checked
    // against it by EveryLayerAndPublicHeaderHasARow); mixprec.h, the umbrella, sits on top.
    const std::string rest = path.substr(16);
    const auto it = l.header.find(rest.substr(rest.rfind('/') + 1));
    if (it == l.header.end()) return std::nullopt;
    return it->second;
  }
  const size_t slash = path.find('/', 4);
  if (path.rfind("src/", 0) != 0 || slash == std::string::npos) return std::nullopt;
  const auto it = l.folder.find(path.substr(4, slash - 4));
  if (it == l.folder.end()) return std::nullopt;
  return it->second;
}

// Every problem with the sources, one line each ("file:line ..."), empty when they keep the rule.
std::vector<std::string> layering_problems(const Layers& l, const std::vector<Source>& sources) {
  std::vector<std::string> problems;
  std::set<std::string> known;
  for (const Source& s : sources) known.insert(s.path);
  const std::regex include(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::map<std::string, std::vector<std::pair<std::string, size_t>>> edges;  // file -> (included, line)
  for (const Source& s : sources) {
    const auto from = layer_of(l, s.path);
    if (!from) {
      problems.push_back(s.path + ": in no layer of docs/design.md's tables (add its folder or header there)");
      continue;
    }
    for (size_t i = 0; i < s.lines.size(); ++i) {
      std::smatch m;
      if (!std::regex_search(s.lines[i], m, include)) continue;
      const std::string h = m[1];
      const std::string target = (h.rfind("mixprec/", 0) == 0 ? "include/" : "src/") + h;
      const std::string where = s.path + ":" + std::to_string(i + 1);
      if (!known.count(target)) {
        // .inc fragments and the like are named from src/ too; anything else is a path this
        // rule cannot place.
        problems.push_back(where + " includes \"" + h + "\", which is neither include/" + h + " nor src/" + h +
                           " (name private headers from src/, public ones as mixprec/...)");
        continue;
      }
      edges[s.path].push_back({target, i + 1});
      const auto to = layer_of(l, target);
      if (to && l.rank(*to) > l.rank(*from))
        problems.push_back(where + " (" + *from + ") includes \"" + h + "\" (" + *to + "), a layer after " + *from +
                           " in docs/design.md's table: move what it needs down, or the code up");
    }
  }
  // Circles: a depth-first walk that finds an edge back to a file on its own path.
  std::map<std::string, int> state;  // 0 new, 1 on the path, 2 done
  std::vector<std::string> path;
  std::function<void(const std::string&)> visit = [&](const std::string& f) {
    state[f] = 1;
    path.push_back(f);
    for (const auto& [to, line] : edges[f]) {
      if (state[to] == 1) {
        std::string circle;
        for (auto it = std::find(path.begin(), path.end(), to); it != path.end(); ++it) circle += *it + " -> ";
        problems.push_back(f + ":" + std::to_string(line) + " closes a circle of includes: " + circle + to);
      } else if (state[to] == 0) {
        visit(to);
      }
    }
    path.pop_back();
    state[f] = 2;
  };
  for (const Source& s : sources)
    if (state[s.path] == 0) visit(s.path);
  return problems;
}

std::vector<Source> repository_sources() {
  std::vector<Source> out;
  for (const char* dir : {"src", "include"})
    for (const auto& e : fs::recursive_directory_iterator(kSource / dir)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".cpp" && ext != ".h" && ext != ".inc" && ext != ".def") continue;
      out.push_back({fs::relative(e.path(), kSource).generic_string(), lines_of(e.path())});
    }
  std::sort(out.begin(), out.end(), [](const Source& a, const Source& b) { return a.path < b.path; });
  return out;
}

Layers design_layers() { return layers_from_design(lines_of(kSource / "docs/design.md")); }

TEST(Layering, DesignTablesNameEveryLayerFolderAndHeader) {
  const Layers l = design_layers();
  // The order is design.md's alone (a new layer is a new row there); only check that the
  // table was found whole and starts where everything starts.
  ASSERT_GE(l.order.size(), 10u) << "docs/design.md's '| layer | folder |' table was not found or lost rows";
  EXPECT_EQ(l.order.front(), "core");
  for (const auto& e : fs::directory_iterator(kSource / "src"))
    if (e.is_directory())
      EXPECT_TRUE(l.folder.count(e.path().filename().string()))
          << "src/" << e.path().filename().string() << " has no row in docs/design.md's layer table";
  // Each public header sits in the folder of its layer (include/mixprec/<layer>/<name>), so a
  // reader sees the layer in every #include; only the umbrella mixprec.h is at the top.
  std::set<std::string> headers;
  for (const auto& e : fs::recursive_directory_iterator(kSource / "include/mixprec")) {
    if (!e.is_regular_file()) continue;
    const std::string h = e.path().filename().string();
    const std::string rel = fs::relative(e.path(), kSource / "include/mixprec").generic_string();
    headers.insert(h);
    const auto it = l.header.find(h);
    if (it == l.header.end()) {
      ADD_FAILURE() << "include/mixprec/" << rel << " has no layer in docs/design.md's public-header table";
      continue;
    }
    const std::string expected = h == "mixprec.h" ? h : it->second + "/" + h;
    EXPECT_EQ(rel, expected) << "include/mixprec/" << rel << " belongs to layer '" << it->second
                             << "' (docs/design.md): move it to include/mixprec/" << expected;
  }
  for (const auto& [h, layer] : l.header) {
    EXPECT_TRUE(headers.count(h)) << "docs/design.md gives a layer to " << h << ", which include/mixprec lacks";
    EXPECT_LT(l.rank(layer), int(l.order.size())) << h << "'s layer '" << layer << "' is not a row of the table";
  }
}

TEST(Layering, EveryIncludePointsToItsOwnOrAnEarlierLayerAndNoneCloseACircle) {
  const Layers l = design_layers();
  const std::vector<Source> sources = repository_sources();
  EXPECT_GT(sources.size(), 250u);  // the walk found the library
  for (const std::string& p : layering_problems(l, sources)) ADD_FAILURE() << p;
}

// The checker itself, on a made-up tree: it must name the file and line of an include that
// points to a later layer, and of one that closes a circle, and pass a tree that keeps the rule.
TEST(Layering, CheckerFindsAnUpwardIncludeAndACircle) {
  const Layers l = design_layers();
  const std::vector<Source> good = {
      {"include/mixprec/core/tensor.h", {"#pragma once", "#include \"mixprec/core/status.h\""}},
      {"include/mixprec/core/status.h", {"#pragma once"}},
      {"src/core/tensor.cpp", {"#include \"mixprec/core/tensor.h\""}},
      {"src/ops/a.cpp", {"#include \"mixprec/core/tensor.h\"", "#include \"core/x.h\""}},
      {"src/core/x.h", {"#pragma once"}},
  };
  EXPECT_TRUE(layering_problems(l, good).empty());

  std::vector<Source> upward = good;
  upward.push_back({"src/ops/b.h", {"#pragma once"}});
  upward[2].lines.push_back("#include \"ops/b.h\"");  // core including ops
  const auto up = layering_problems(l, upward);
  ASSERT_EQ(up.size(), 1u);
  EXPECT_NE(up[0].find("src/core/tensor.cpp:2 (core) includes \"ops/b.h\" (ops)"), std::string::npos) << up[0];

  std::vector<Source> circle = good;
  circle.push_back({"src/core/y.h", {"#pragma once", "#include \"core/x.h\""}});
  circle[4].lines.push_back("#include \"core/y.h\"");  // x.h -> y.h -> x.h, one layer
  const auto c = layering_problems(l, circle);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_NE(c[0].find("closes a circle of includes"), std::string::npos) << c[0];
  EXPECT_NE(c[0].find("src/core/x.h"), std::string::npos) << c[0];

  std::vector<Source> unplaced = good;
  unplaced[3].lines.push_back("#include \"a_sibling.h\"");
  const auto u = layering_problems(l, unplaced);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_NE(u[0].find("src/ops/a.cpp:3"), std::string::npos) << u[0];
}

}  // namespace
