// training_run_report.cpp: what a training run tells its user before the first step: the
// banner's rows (model, data, steps, precision, data-parallel layout), what --skip-bad left
// out, and the settings that will quietly do little in a run this small. (training_run.cpp
// sets the run up; trainer.cpp runs it.)
#include <omp.h>

#include <fmt/format.h>

#include "mixprec/train/train_config.h"
#include "train/training_run.h"

namespace mixprec::train {

// Settings that make sense for a large run and quietly do little in this one (issue 31): the
// run still goes ahead, as PyTorch's would, and the user is told why it may disappoint.
void TrainingRun::warn_about_small_run() {
  if (!cb_.on_warning) return;
  const int64_t examples = data_.train->count;
  if (config_.batch_size > examples)
    cb_.on_warning("--batch-size " + std::to_string(config_.batch_size) + " is larger than the training set (" +
                   std::to_string(examples) + " examples): every step takes the whole set, so an epoch is one step");
  if (config_.warmup_steps > 0 && config_.warmup_steps >= total_)
    cb_.on_warning("--warmup-steps " + std::to_string(config_.warmup_steps) + " is not shorter than the run (" +
                   std::to_string(total_) + " steps): the learning rate never reaches --lr " + fmt::format("{:g}", config_.lr));
}

std::string TrainingRun::data_shape_text() const {
  const ImageDataset& d = *data_.train;
  if (d.tokens)
    return "; " + std::to_string(d.num_classes) + " classes; column '" + config_.text_column + "', up to " +
           std::to_string(d.width) + " bytes per text";
  if (d.name != "folder" && d.name != "csv" && d.name != "npy") return "";  // the built-ins say it in their names
  if (d.height == 1 && d.width == 1)
    return "; " + std::to_string(d.num_classes) + " classes, " + std::to_string(d.channels) + " feature columns";
  return "; " + std::to_string(d.num_classes) + " classes of " + std::to_string(spec_.channels) + "x" +
         std::to_string(spec_.height) + "x" + std::to_string(spec_.width);
}

std::string TrainingRun::augmentation_text() const {
  std::string text;
  if (config_.random_crop > 0) text = "random crop (padding " + std::to_string(config_.random_crop) + ")";
  if (config_.hflip) text += (text.empty() ? "" : ", ") + std::string("horizontal flip");
  return text.empty() ? "none" : text;
}

void TrainingRun::announce() {
  // --skip-bad: what was left out, said before anything trains on the rest.
  for (const auto* d : {data_.train.get(), data_.test.get()})
    if (cb_.on_warning && d->skipped.count > 0)
      cb_.on_warning("--skip-bad: " + std::string(d == data_.train.get() ? "training" : "test") + " data: " +
                     d->skipped.summary().substr(2));
  if (!cb_.on_start) return;
  const std::string micro =
      config_.accumulate > 1 ? ", " + std::to_string(config_.accumulate) + " micro-batches each" : "";
  std::vector<std::pair<std::string, std::string>> rows = {
                {"model", spec_.name + " (" + std::to_string(step_->model().num_parameters()) + " parameters)"},
                {"dataset", data_.train->name + " (" + std::to_string(data_.train->count) + " train, " +
                                std::to_string(data_.test->count) + (config_.val_split > 0 ? " held out" : " test") +
                                data_shape_text() + ")"},
                {"augmentation", augmentation_text()},
                {"steps", std::to_string(total_) + " (" + std::to_string(per_epoch_) + " per epoch" + micro + ")"},
                {"threads", std::to_string(omp_get_max_threads())},
                {"precision", preset_.name + " (" + preset_.level + ": " + preset_.description + ")"},
                {"loss scaling", preset_.loss_scaling ? "dynamic, init " + number_text(config_.init_scale) +
                                                            ", interval " + std::to_string(config_.growth_interval)
                                                      : "off"},
                {"self-check", result_.self_check.empty() ? "-" : result_.self_check}};
  if (dp_) {
    const std::string n = std::to_string(dp_->ranks());
    rows.insert(rows.begin() + 3,
                {"data-parallel", n + " ranks (" + dp_->communicator().backend() + "): global batch " +
                                      std::to_string(config_.batch_size) + " = " + n + " x " +
                                      std::to_string(config_.batch_size / dp_->ranks()) +
                                      " per rank; gradients averaged in " + config_.allreduce_dtype +
                                      (config_.bucket_mb > 0 ? " (buckets of " + number_text(config_.bucket_mb) +
                                                                   " MB during backward)"
                                                             : " after backward") +
                                      (config_.sync_bn ? "; BatchNorm synchronised" : "") + "; rank 0 writes"});
  }
  cb_.on_start(config_, rows);
}

}  // namespace mixprec::train
