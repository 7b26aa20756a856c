// data_parallel.h: what one rank of a data-parallel run (mpirun -np N mixprec train) does
// with the others, on top of a dist::Communicator (docs/distributed.md).
//
// Every rank holds the whole model and trains on its shard of each global batch
// (DataLoaderOptions::shard_rank). Per step:
//   agree_on_step   rendezvous: all ranks at the same step; the step's total samples
//   begin_gradients, gradient_ready, finish_gradients
//                   the gradients summed over ranks (gradient_reducer.h: buckets started as
//                   backward produces them, f32 or bf16 on the wire), divided by N, each
//                   rank's weighted by its share of the samples
//   mean_loss       the step's loss over all samples (what rank 0 reports)
//   any             the GradScaler's found-inf flag combined with MAX, so every rank skips
//                   the same steps and keeps the same scale
//   sync_buffers    BatchNorm running statistics from rank 0 (as PyTorch DDP's broadcast_buffers)
// and, at the start, at the end and every --dist-check-every steps, check_same / check_replicas
// compare hashes of the config, data, binary and weights across ranks. Every failure is a
// StatusCode::distributed error naming the ranks.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/backend/batch_norm_sync.h"
#include "mixprec/data/data.h"
#include "mixprec/dist/distributed.h"
#include "mixprec/nn/nn.h"
#include "mixprec/core/tensor.h"
#include "train/gradient_reducer.h"

namespace mixprec::train {

class DataParallel {
 public:
  explicit DataParallel(dist::Communicator& comm, ReducerOptions reducer = {})
      : comm_(comm), reducer_(comm, reducer), overlap_(reducer.bucket_bytes > 0) {}

  int rank() const { return comm_.rank(); }
  int ranks() const { return comm_.size(); }
  dist::Communicator& communicator() { return comm_; }

  // Before step `step`: this rank's sample count in, the weight of this rank's gradients out
  // (samples x ranks / total: 1 when the shards are equal).
  StatusOr<double> agree_on_step(int64_t step, int64_t samples);
  // A step's gradient reduction over `params` (the optimizer's): each p.grad() :=
  // (sum over ranks of weight x p.grad()) / ranks, for every defined gradient (any dtype;
  // summed as f32 or bf16, see ReducerOptions). Undefined gradients take part as zeros and
  // stay undefined. gradient_ready(i, g) during backward hands params[i]'s final gradient over
  // early (g may be another tensor holding the same values, as an O2 model weight's 16-bit
  // gradient for its f32 master); finish_gradients reads the rest from the params' .grad.
  void begin_gradients(const std::vector<Tensor>& params, double weight, int64_t step);
  Status gradient_ready(size_t index, const Tensor& grad) { return reducer_.ready(index, grad); }
  Status finish_gradients(const std::vector<Tensor>& params);
  // begin_gradients + finish_gradients: everything after backward.
  Status reduce_gradients(const std::vector<Tensor>& params, double weight, int64_t step);
  // Whether the buckets start during backward (ReducerOptions::bucket_bytes > 0).
  bool overlaps_backward() const { return overlap_; }
  // Time this rank spent blocked on the others (rendezvous, waiting for gradient buckets,
  // loss, flags, buffers) since the last call, in ms: the communication share of a step.
  double take_communication_ms();
  // Gradient buckets reduced so far, and how many of them started during backward.
  int64_t buckets_reduced() const { return buckets_reduced_; }
  int64_t buckets_started_early() const { return buckets_started_early_; }
  StatusOr<double> mean_loss(double loss, double weight, int64_t step);
  // --sync-bn: BatchNorm statistics summed over the ranks (batch_norm_sync.h); the gradient
  // sums weighted by this rank's share of the step's samples, as its gradients are.
  std::shared_ptr<const BatchNormSync> batch_norm_sync();
  // values := their element-wise sum over the ranks (the evaluation's counts and losses).
  Status sum_over_ranks(std::span<double> values, const std::string& what) { return comm_.allreduce_sum(values, what); }
  // Rank 0's `text` on every rank (the others' argument is ignored).
  StatusOr<std::string> broadcast_text(const std::string& text, const std::string& what);
  // True on every rank when it is true on any.
  StatusOr<bool> any(bool flag, const std::string& what);
  // Every buffer (BatchNorm running statistics) := rank 0's.
  Status sync_buffers(nn::Module& model, int64_t step);

  // Each (name, hash) must be the same on every rank: the first that differs is named with the
  // ranks that hold another value than rank 0 ("the dataset differs on rank 1").
  Status check_same(const std::vector<std::pair<std::string, uint64_t>>& items, const std::string& when);
  // check_same for a JSON object's text; when it differs, each rank that differs names the
  // keys whose values differ from rank 0's ("lr: 0.01 here, 0.001 on rank 0").
  Status check_same_text(const std::string& name, const std::string& json_text, const std::string& when);
  // check_same on a hash of the parameters and the loss scale.
  Status check_replicas(const std::vector<Tensor>& params, double scale, int64_t step);

 private:
  dist::Communicator& comm_;
  GradientReducer reducer_;
  bool overlap_;
  std::vector<Tensor> grads_;     // the step's gradients, gathered once per step
  std::vector<int64_t> numels_;  // the parameters' sizes, checked against the reducer's layout
  double step_weight_ = 1.0;   // this step's agree_on_step weight
  int64_t step_ = 0;
  double communication_ms_ = 0.0;
  int64_t buckets_reduced_ = 0, buckets_started_early_ = 0;
};

// Hashes a rank compares: of tensors' bytes (in order, with their shapes), and of text.
uint64_t hash_tensors(const std::vector<Tensor>& tensors);
uint64_t hash_text(const std::string& text);
uint64_t hash_dataset(const ImageDataset& d);  // its pixels (or table values) and labels
// What makes two processes the same program: their executable's bytes (ranks started from
// separately built copies of mixprec may round differently).
uint64_t hash_executable();

// The global batch sizes nearest `batch` that split evenly over `parts` ranks or workers, for
// the message that refuses one that does not: "63 or 66" (only the larger when none is below).
std::string even_batches_near(int64_t batch, int parts);

}  // namespace mixprec::train
