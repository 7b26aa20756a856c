// validate.cpp: train::validate(): every setting against its row of the table
// (train_config.h), then what one row cannot say: gaps in a range, bounds of this machine,
// names that the presets and models know, and settings that need each other.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "mixprec/nn/model_file.h"
#include "mixprec/nn/models.h"
#include "mixprec/amp/precision.h"
#include "mixprec/train/train.h"
#include "mixprec/core/hardware.h"
#include "mixprec/train/train_config.h"
#include "train/data_parallel.h"

namespace mixprec::train {

// More threads than 4x the hardware only adds contention; far more (100,000) made the OpenMP
// runtime crash while creating them.

Status validate(const TrainConfig& c, bool check_names) {
  auto bad = [](const std::string& flag, const std::string& what) {
    return Status::invalid_argument(flag + ": " + what);
  };
  for (const ConfigField& f : config_fields()) {
    if (!check_names && (f.key == "model" || f.key == "dataset")) continue;
    if (std::string why = check_field(f, c); !why.empty())
      return bad(f.flag.empty() ? "configuration field '" + f.key + "'" : f.flag, why);
  }
  // What one row cannot say: gaps in a range, bounds of this machine, names other code knows.
  if (c.max_steps == 0) return bad("--max-steps", "must be >= 1 (or -1 for no limit), got 0");
  if (c.threads > max_thread_count())
    return bad("--threads", "must be from 0 (all cores) to " + std::to_string(max_thread_count()) +
                                " (4x this machine's " + std::to_string(omp_get_num_procs()) +
                                " hardware threads), got " + std::to_string(c.threads));
  if (c.workers > max_thread_count())
    return bad("--workers", "must be from 0 (chosen by the load) to " + std::to_string(max_thread_count()) + " (4x this machine's " +
                                std::to_string(omp_get_num_procs()) + " hardware threads), got " +
                                std::to_string(c.workers));
  if (c.workers > 1 && c.batch_size % c.workers != 0)
    return bad("--batch-size", std::to_string(c.batch_size) + " must divide evenly over --workers " +
                                   std::to_string(c.workers) + " (try " + even_batches_near(c.batch_size, c.workers) +
                                   ")");
  if (auto p = amp::preset_by_name(c.precision); !p.is_ok()) return bad("--precision", p.status().message());
  if (!(c.loss_spike_factor == 0 || c.loss_spike_factor > 1))
    return bad("--loss-spike", "must be > 1 (a multiple of the median of the last 50 step losses) or 0 (off), got " +
                                   field_text(*find_config_field("loss_spike_factor"), c));
  if ((c.save_every > 0 || !c.resume.empty()) && c.run_dir.empty() && c.resume.empty())
    return bad("--save-every", "needs a run directory (--run-dir)");
  if (c.on_divergence == "rollback" && c.run_dir.empty() && c.resume.empty())
    return bad("--on-divergence", "rollback restores the last checkpoint, so it needs a run directory (--run-dir)");
  if (!c.init_from.empty() && !c.resume.empty())
    return bad("--init-from", "cannot be combined with --resume (--resume restores the weights, optimizer and "
                              "scaler state of the run; --init-from starts a new run from given weights)");
  if (c.overwrite && !c.resume.empty())
    return bad("--overwrite", "cannot be combined with --resume (--resume continues the run in the directory, "
                              "--overwrite deletes it)");
  if (c.min_lr > c.lr)
    return bad("--min-lr", "must not exceed --lr (" + field_text(*find_config_field("lr"), c) + "), got " +
                               field_text(*find_config_field("min_lr"), c));
  if (!c.text_column.empty() && check_names && c.dataset != "csv")
    return bad("--text-column", "reads a CSV's text column: it needs --dataset csv, got --dataset " + c.dataset);
  if (!check_names || nn::is_model_file(c.model)) return Status::ok();  // read and checked with the data (load_data)
  if (auto spec = nn::model_spec(c.model); !spec.is_ok()) return bad("--model", spec.status().message());
  return Status::ok();
}

}  // namespace mixprec::train
