// train_data.h: turns a run's --dataset/--data-dir into train and test datasets that fit its
// model (what `mixprec train`, `eval` and `predict` read).
#pragma once
#include <memory>
#include <string>

#include "mixprec/data.h"
#include "mixprec/models.h"
#include "mixprec/train.h"

namespace mixprec::train {

struct DataSplits {
  std::shared_ptr<const ImageDataset> train, test;
};

// Default directory of a named dataset ("/usr/share/datasets/fashion-mnist", ...), or "".
std::string default_data_dir(const std::string& dataset);

// Loads (or synthesises) both splits and checks their geometry against the model's input.
StatusOr<DataSplits> load_data(const TrainConfig& config, const nn::ModelSpec& spec);

}  // namespace mixprec::train
