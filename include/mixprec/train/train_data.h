// train_data.h: turns a run's --dataset/--data-dir into train and test datasets that fit its
// model (what `mixprec train`, `eval` and `predict` read).
#pragma once
#include <memory>
#include <string>

#include "mixprec/data/data.h"
#include "mixprec/nn/models.h"
#include "mixprec/train/train.h"

namespace mixprec::train {

struct DataSplits {
  std::shared_ptr<const ImageDataset> train, test;
  // The model's geometry: the given spec, or for data that decides it (--dataset folder) the
  // images' channels, size and classes.
  nn::ModelSpec spec;
};

// Default directory of a named dataset ("/usr/share/datasets/fashion-mnist", ...), or "".
std::string default_data_dir(const std::string& dataset);

// Loads (or synthesises) both splits and checks their geometry against the model's input
// (or, for --dataset folder, fits the model to the images).
StatusOr<DataSplits> load_data(const TrainConfig& config, const nn::ModelSpec& spec);

// The whole of a labelled set to evaluate a run on (`mixprec eval RUN --data-dir NEW`), read
// with the run's classes, feature columns and normalisation, and checked against its model:
// --dataset folder: DIR/test/ (or DIR/val/) when DIR has one, else every DIR/<class>/ image
// (a DIR with train/ and no test/ is refused, naming DIR/train as the way to score it);
// --dataset csv: FILE.csv whole, or DIR/test.csv. Other datasets: invalid_argument (they have
// their own test split: load_data).
StatusOr<std::shared_ptr<const ImageDataset>> load_labelled_set(const TrainConfig& config, const nn::ModelSpec& spec);

// The run's model: model_spec(config.model) with the input and classes the run recorded
// (input_channels, ..., num_classes), as eval, predict and a resume must build it.
StatusOr<nn::ModelSpec> model_spec_of(const TrainConfig& config);
// Writes the geometry, class and feature names the data decided into config (--dataset
// folder and csv only).
void record_geometry(TrainConfig& config, const DataSplits& data);

}  // namespace mixprec::train
