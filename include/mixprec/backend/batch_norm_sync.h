// batch_norm_sync.h: BatchNorm over the batch of every process of a data-parallel run
// (`mpirun ... mixprec train --sync-bn`, PyTorch's SyncBatchNorm).
//
// While a BatchNormSyncGuard is alive on a thread, training-mode batch_norm there normalises
// with the mean and variance of all processes' samples: it hands its per-channel sums (and
// its value count) to `sum_statistics`, which must replace them in place by their sums over
// the processes, and in backward the two per-channel sums dx depends on (of dy and of
// dy * xhat) to `sum_gradients`, which sums them the way the processes' gradients are
// combined. The weight and bias gradients stay this process's own: the gradient all-reduce
// averages them, as PyTorch's does. Every process must run the same batch_norm calls in the
// same order (the sums are collectives).
#pragma once
#include <functional>
#include <memory>
#include <span>

namespace mixprec {

struct BatchNormSync {
  std::function<void(std::span<double>)> sum_statistics;
  std::function<void(std::span<double>)> sum_gradients;
};

class BatchNormSyncGuard {
 public:
  explicit BatchNormSyncGuard(std::shared_ptr<const BatchNormSync> sync);
  ~BatchNormSyncGuard();
  BatchNormSyncGuard(const BatchNormSyncGuard&) = delete;
  BatchNormSyncGuard& operator=(const BatchNormSyncGuard&) = delete;

 private:
  std::shared_ptr<const BatchNormSync> previous_;
};

// The innermost guard's BatchNormSync on this thread (null: none).
std::shared_ptr<const BatchNormSync> current_batch_norm_sync();

}  // namespace mixprec
