// data_parallel.h: what one rank of a data-parallel run (mpirun -np N mixprec train) does
// with the others, on top of a dist::Communicator (docs/distributed.md).
//
// Every rank holds the whole model and trains on its shard of each global batch
// (DataLoaderOptions::shard_rank). Per step:
//   agree_on_step   rendezvous: all ranks at the same step; the step's total samples
//   reduce_gradients the gradients summed over ranks in f32 (one flat buffer), divided by N,
//                   each rank's weighted by its share of the samples
//   mean_loss       the step's loss over all samples (what rank 0 reports)
//   any             the GradScaler's found-inf flag combined with MAX, so every rank skips
//                   the same steps and keeps the same scale
//   sync_buffers    BatchNorm running statistics from rank 0 (as PyTorch DDP's broadcast_buffers)
// and, at the start, at the end and every --dist-check-every steps, check_same / check_replicas
// compare hashes of the config, data, binary and weights across ranks. Every failure is a
// StatusCode::distributed error naming the ranks.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/data.h"
#include "mixprec/distributed.h"
#include "mixprec/nn.h"
#include "mixprec/tensor.h"

namespace mixprec::train {

class DataParallel {
 public:
  explicit DataParallel(dist::Communicator& comm) : comm_(comm) {}

  int rank() const { return comm_.rank(); }
  int ranks() const { return comm_.size(); }
  dist::Communicator& communicator() { return comm_; }

  // Before step `step`: this rank's sample count in, the weight of this rank's gradients out
  // (samples x ranks / total: 1 when the shards are equal).
  StatusOr<double> agree_on_step(int64_t step, int64_t samples);
  // grads[i] := (sum over ranks of weight x grads[i]) / ranks, for every defined gradient (any
  // dtype; summed in f32). Undefined gradients take part as zeros and stay undefined.
  Status reduce_gradients(const std::vector<Tensor>& grads, double weight, int64_t step);
  StatusOr<double> mean_loss(double loss, double weight, int64_t step);
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
  std::vector<float> flat_;  // the gradient buffer, sized once
};

// Hashes a rank compares: of tensors' bytes (in order, with their shapes), and of text.
uint64_t hash_tensors(const std::vector<Tensor>& tensors);
uint64_t hash_text(const std::string& text);
uint64_t hash_dataset(const ImageDataset& d);  // its pixels (or table values) and labels
// What makes two processes the same program: their executable's bytes (ranks started from
// separately built copies of mixprec may round differently).
uint64_t hash_executable();

}  // namespace mixprec::train
