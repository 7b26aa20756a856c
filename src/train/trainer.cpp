// trainer.cpp: the training loop. One step: zero_grad -> forward -> cross_entropy ->
// backward -> optimizer step; evaluation after each epoch under NoGradGuard.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "mixprec/amp.h"
#include "mixprec/autograd.h"
#include "mixprec/data.h"
#include "mixprec/grad_scaler.h"
#include "mixprec/precision.h"
#include "mixprec/models.h"
#include "mixprec/ops.h"
#include "mixprec/optim.h"
#include "mixprec/train.h"
#include "train/data_source.h"

namespace mixprec::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c, std::vector<Tensor> params) {
  if (c.optimizer == "sgd")
    return std::make_unique<optim::SGD>(
        std::move(params), optim::SGDOptions{.lr = c.lr, .momentum = c.momentum, .weight_decay = c.weight_decay});
  optim::AdamOptions o;
  o.lr = c.lr;
  o.weight_decay = c.weight_decay;
  if (c.optimizer == "adamw") return std::make_unique<optim::AdamW>(std::move(params), o);
  return std::make_unique<optim::Adam>(std::move(params), o);
}

EvalReport evaluate(nn::Module& model, const std::shared_ptr<const ImageDataset>& test,
                    int64_t batch_size, const amp::Preset& preset) {
  NoGradGuard ng;
  std::optional<amp::AutocastGuard> autocast;
  if (preset.autocast_dtype) autocast.emplace(*preset.autocast_dtype);
  model.eval();
  DataLoader loader(test, {.batch_size = batch_size, .shuffle = false, .prefetch = 1});
  EvalReport r;
  int64_t correct = 0;
  double loss_sum = 0.0;
  while (auto batch = loader.next()) {
    Tensor logits = model(batch->images.to(preset.param_dtype));
    loss_sum += cross_entropy(logits, batch->labels, Reduction::sum).item();
    const Tensor pred = argmax(logits);
    const int64_t* p = pred.data_ptr<int64_t>();
    const int64_t* y = batch->labels.data_ptr<int64_t>();
    for (int64_t i = 0; i < pred.numel(); ++i) correct += p[i] == y[i];
    r.samples += pred.numel();
  }
  model.train();
  r.accuracy = r.samples ? double(correct) / double(r.samples) : 0.0;
  r.loss = r.samples ? loss_sum / double(r.samples) : 0.0;
  return r;
}

}  // namespace

Status validate(const TrainConfig& c) {
  auto bad = [](const std::string& flag, const std::string& what) {
    return Status::invalid_argument(flag + ": " + what);
  };
  if (c.epochs < 1) return bad("--epochs", "must be >= 1, got " + std::to_string(c.epochs));
  if (c.max_steps == 0 || c.max_steps < -1)
    return bad("--max-steps", "must be >= 1 (or -1 for no limit), got " + std::to_string(c.max_steps));
  if (c.batch_size < 1) return bad("--batch-size", "must be >= 1, got " + std::to_string(c.batch_size));
  if (!(c.lr > 0) || !std::isfinite(c.lr)) return bad("--lr", "must be a positive number, got " + std::to_string(c.lr));
  if (!(c.weight_decay >= 0)) return bad("--weight-decay", "must be >= 0");
  if (c.optimizer != "adam" && c.optimizer != "adamw" && c.optimizer != "sgd")
    return bad("--optimizer", "expected one of: adam, adamw, sgd; got '" + c.optimizer + "'");
  if (c.threads < 0) return bad("--threads", "must be >= 0 (0 = all cores)");
  if (auto p = amp::preset_by_name(c.precision); !p.is_ok()) return bad("--precision", p.status().message());
  if (!(c.init_scale > 0)) return bad("--init-scale", "must be > 0");
  if (!(c.growth_factor > 1)) return bad("--growth-factor", "must be > 1");
  if (!(c.backoff_factor > 0 && c.backoff_factor < 1)) return bad("--backoff-factor", "must be in (0, 1)");
  if (c.growth_interval < 1) return bad("--growth-interval", "must be >= 1");
  if (c.hysteresis < 1) return bad("--hysteresis", "must be >= 1");
  if (!(c.min_scale >= 0)) return bad("--min-scale", "must be >= 0");
  auto spec = nn::model_spec(c.model);
  if (!spec.is_ok()) return bad("--model", spec.status().message());
  return Status::ok();
}

StatusOr<TrainResult> run(const TrainConfig& config, const Callbacks& cb) {
  MIXPREC_RETURN_IF_ERROR(validate(config));
  if (config.threads > 0) omp_set_num_threads(config.threads);
  const nn::ModelSpec spec = nn::model_spec(config.model).value();
  auto data = load_data(config, spec);
  if (!data.is_ok()) return data.status();

  const amp::Preset preset = amp::preset_by_name(config.precision).value();
  manual_seed(config.seed);
  std::shared_ptr<nn::Module> model = nn::make_model(spec);
  // Same seed, same initial weights in every preset: they are drawn in f32, then converted.
  if (preset.param_dtype != DType::f32) model->to(preset.param_dtype, preset.keep_norm_fp32);
  std::optional<amp::MasterWeights> masters;
  if (preset.master_weights) masters.emplace(model->named_parameters());
  auto opt = make_optimizer(config, masters ? masters->masters() : model->parameters());
  amp::GradScalerOptions so;
  so.enabled = preset.loss_scaling;
  so.init_scale = config.init_scale;
  so.growth_factor = config.growth_factor;
  so.backoff_factor = config.backoff_factor;
  so.growth_interval = config.growth_interval;
  so.hysteresis = config.hysteresis;
  if (config.min_scale > 0) so.min_scale = config.min_scale;
  amp::GradScaler scaler(so);
  scaler.name_parameters(masters ? masters->named_masters() : model->named_parameters());
  DataLoader loader(data->train, {.batch_size = config.batch_size, .shuffle = config.shuffle,
                                  .seed = config.seed});
  const int64_t per_epoch = loader.num_batches();
  int64_t total = per_epoch * config.epochs;
  if (config.max_steps > 0) total = std::min(total, config.max_steps);

  if (cb.on_start) {
    cb.on_start(config, {{"model", spec.name + " (" + std::to_string(model->num_parameters()) + " parameters)"},
                         {"dataset", data->train->name + " (" + std::to_string(data->train->count) +
                                         " train, " + std::to_string(data->test->count) + " test)"},
                         {"steps", std::to_string(total) + " (" + std::to_string(per_epoch) + " per epoch)"},
                         {"threads", std::to_string(omp_get_max_threads())},
                         {"precision", preset.name + " (" + preset.level + ": " + preset.description + ")"},
                         {"loss scaling", preset.loss_scaling ? "dynamic, init " + std::to_string(config.init_scale) +
                                                                   ", interval " + std::to_string(config.growth_interval)
                                                             : "off"}});
  }

  TrainResult result;
  const auto t_start = Clock::now();
  std::vector<double> step_seconds;
  reset_peak_memory();
  int64_t step = 0;
  auto window_start = Clock::now();
  int64_t window_images = 0;
  for (int64_t epoch = 0; epoch < config.epochs && step < total; ++epoch) {
    loader.set_epoch(epoch);
    while (step < total) {
      auto batch = loader.next();
      if (!batch) break;
      const auto t0 = Clock::now();
      opt->zero_grad();
      model->zero_grad();
      Tensor loss;
      {
        std::optional<amp::AutocastGuard> autocast;
        if (preset.autocast_dtype) autocast.emplace(*preset.autocast_dtype);
        loss = cross_entropy((*model)(batch->images.to(preset.param_dtype)), batch->labels);
      }
      const double loss_value = loss.item();
      if (!std::isfinite(loss_value) && !scaler.is_enabled()) {
        const std::string msg = "training diverged: loss is " + std::to_string(loss_value) +
                                " at step " + std::to_string(step + 1) + " (epoch " +
                                std::to_string(epoch + 1) + ", precision " + preset.name +
                                "); try a lower --lr or a preset with loss scaling";
        if (config.stop_on_divergence) return Status::diverged(msg);
        result.diverged = true;
        result.diverged_at_step = step + 1;
        result.losses.push_back(loss_value);
        break;
      }
      const double scale_used = scaler.get_scale();
      scaler.scale(loss).backward();
      if (masters) masters->accumulate_grads();
      const bool stepped = scaler.step(*opt);
      scaler.update();
      if (masters && stepped) masters->copy_to_model();
      step_seconds.push_back(seconds_since(t0));
      ++step;
      window_images += batch->images.size(0);
      result.losses.push_back(loss_value);
      if (cb.on_step) {
        StepReport r;
        r.step = step;
        r.total_steps = total;
        r.epoch = epoch;
        r.loss = loss_value;
        r.lr = opt->lr();
        r.scale = scale_used;
        r.skipped = !stepped;
        r.skipped_total = scaler.skipped_steps();
        const double w = seconds_since(window_start);
        r.images_per_second = w > 0 ? double(window_images) / w : 0.0;
        r.elapsed_seconds = seconds_since(t_start);
        cb.on_step(r);
        if (w > 2.0) {  // a sliding window keeps images/s current
          window_start = Clock::now();
          window_images = 0;
        }
      }
    }
    if (result.diverged) break;
    if (config.evaluate) {
      EvalReport e = evaluate(*model, data->test, config.batch_size, preset);
      e.epoch = epoch;
      e.step = step;
      result.evals.push_back(e);
      result.best_accuracy = std::max(result.best_accuracy, e.accuracy);
      result.final_accuracy = e.accuracy;
      if (cb.on_eval) cb.on_eval(e);
    }
  }
  result.steps = step;
  result.seconds = seconds_since(t_start);
  if (!step_seconds.empty()) {
    std::vector<double> s = step_seconds;
    std::nth_element(s.begin(), s.begin() + s.size() / 2, s.end());
    result.seconds_per_step = s[s.size() / 2];
  }
  result.peak_activation_bytes = peak_bytes(MemoryCategory::activations);
  result.peak_total_bytes = memory_stats().total_peak;
  result.skipped_steps = scaler.skipped_steps();
  result.final_scale = scaler.get_scale();
  result.precision = preset.name;
  return result;
}

}  // namespace mixprec::train
