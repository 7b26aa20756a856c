// model_planner.h: the Planner behind plan_model_file (model_plan.h): the file's structure
// (model_plan.cpp: lists, repeat blocks, names, precision, errors at file:line:column) and the
// helpers each layer type's plan function (layer_type.h) checks its parameters with.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/yaml_json.h"
#include "nn/model_plan.h"

namespace mixprec::nn::plan_detail {

using json = nlohmann::json;

constexpr int64_t kMaxWidth = 65536, kMaxKernel = 64, kMaxRepeat = 256, kMaxLayers = 4096, kMaxNesting = 16;

// Every layer type's name (layer_type.h), and "repeat".
std::vector<std::string> type_names();
std::string shape_text(const std::vector<int64_t>& s);
int64_t product(const std::vector<int64_t>& s);

class Planner {
 public:
  // token_input: the model's input is byte ids [T] (a text classifier or a language model)
  // until an embedding. language_model: the file ends in lm_head (entry_type).
  Planner(const std::string& source, const io::Positions& positions, int64_t classes,
          std::vector<ModelFileLayer>* rows, int64_t max_parameters, bool token_input, bool language_model)
      : source_(source), positions_(positions), classes_(classes), rows_(rows), max_parameters_(max_parameters),
        ids_(token_input), language_model_(language_model) {}

  // Appends the layers of the list at `pointer` to `seq`; `shape` flows through them.
  Status block(const json& list, const std::string& pointer, std::vector<LayerPlan>& seq, std::vector<int64_t>& shape,
               const std::string& prefix, int nesting);

  // For the layer types' plan functions (layer_types_*.cpp). A parameter: given, "classes"
  // (for out), or its fallback (none: required); in [lo, hi]; errors at its position.
  StatusOr<int64_t> integer(const std::map<std::string, json>& p, const char* key, const std::string& at,
                            std::optional<int64_t> fallback, int64_t lo, int64_t hi);
  StatusOr<double> number(const std::map<std::string, json>& p, const char* key, const std::string& at,
                          double fallback, double lo, double hi, bool hi_open);
  StatusOr<bool> boolean(const std::map<std::string, json>& p, const char* key, const std::string& at, bool fallback);
  // Counts a layer's parameters against the budget before the layer allocates them.
  Status budget(const std::string& at, int64_t layer_parameters);
  Status needs_image(const std::string& type, const std::string& at, const std::vector<int64_t>& shape);
  // An error at the recorded position of `pointer` (or its nearest enclosing value).
  Status error(const std::string& pointer, const std::string& what);
  int64_t max_parameters() const { return max_parameters_; }
  bool language_model() const { return language_model_; }
  // The text layers' state: the shape flowing is byte ids until an embedding; its width, for
  // a tied lm_head; lm_head seen (nothing may follow).
  void set_reads_ids(bool ids) { ids_ = ids; }
  int64_t embedding_dim() const { return embedding_dim_; }
  void set_embedding_dim(int64_t dim) { embedding_dim_ = dim; }
  void end_language_model() { ended_ = true; }
  // A language model's layers: each position sees itself and the ones before it only.
  Status fits_language_model(const std::string& type, const std::string& at);

 private:
  // model_plan.cpp: the structure.
  Status repeat(const json& entry, const std::string& at, std::vector<LayerPlan>& seq, std::vector<int64_t>& shape,
                const std::string& prefix, int nesting, std::set<std::string>& names);
  Status block_into(const json& list, const std::string& pointer, std::vector<LayerPlan>& seq,
                    std::vector<int64_t>& shape, const std::string& prefix, int nesting, std::set<std::string>& names);
  Status layer(const json& entry, const std::string& at, std::vector<LayerPlan>& seq, std::vector<int64_t>& shape,
               const std::string& prefix, int nesting, std::set<std::string>& names);
  std::string list_text(const std::vector<std::string>& names);

  const std::string& source_;
  const io::Positions& positions_;
  int64_t classes_;
  std::vector<ModelFileLayer>* rows_;
  int64_t max_parameters_;
  int64_t count_ = 0, parameters_ = 0;
  bool ids_;  // the shape flowing is [T] byte ids, not numbers
  bool language_model_;
  int64_t embedding_dim_ = 0;  // the token table's width, for a tied lm_head
  bool ended_ = false;         // lm_head seen: nothing may follow
};

// The type of a layer entry: "relu" for relu, "conv2d" for {conv2d: {...}, name: c1},
// "repeat" for a repeat block; "" when it names none.
std::string entry_type(const json& entry);
// Whether that type ends a language model (lm_head), and whether it reads byte ids (the
// first layer of a text model: embedding); false for no type.
bool ends_language_model(const json& entry);
bool reads_ids(const json& entry);

}  // namespace mixprec::nn::plan_detail
