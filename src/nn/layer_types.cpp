// layer_types.cpp: the one list of layer types (layer_type.h): each family file's entries, in
// the order error messages list them. A new type goes into its family's list (or a new
// family's, added here); nothing else names it.
#include <string>

#include "nn/layer_type.h"

namespace mixprec::nn {

const std::vector<const LayerType*>& layer_types() {
  static const std::vector<const LayerType*> types = [] {
    std::vector<const LayerType*> all;
    for (auto family : {image_layer_types, dense_layer_types, text_layer_types})
      for (const LayerType* t : family()) all.push_back(t);
    return all;
  }();
  return types;
}

const LayerType* find_layer_type(const std::string& name) {
  for (const LayerType* t : layer_types())
    if (name == t->name) return t;
  return nullptr;
}

const LayerType* layer_type_of(const Module& m, const OnnxValue& x) {
  for (const LayerType* t : layer_types())
    if (t->emits(m, x)) return t;
  return nullptr;
}

}  // namespace mixprec::nn
