// gradient_reducer.h: a data-parallel step's gradients summed over the ranks in buckets, each
// started as soon as backward has produced all of its gradients (PyTorch DDP's Reducer), so
// that communication overlaps the rest of backward.
//
// The parameters are laid out in reverse order (backward produces the last layers' gradients
// first) into buckets of about `bucket_bytes` of f32 (the first one smaller, so that the wire
// is busy early); a parameter of `in_place_bytes` or more is a bucket of its own and, when it
// can be, is reduced where its gradient is (no copy in and out: the large weight matrices are
// most of the bytes). Per step:
//   begin(weight, step)     forget the last step's readiness
//   ready(i, grad)          parameter i's gradient is final: copied into its bucket as
//                           f32 x weight; every complete bucket is started, in bucket order
//                           (every rank must start collectives in the same order)
//   finish(grads)           the gradients never reported (undefined ones as zeros) are
//                           copied, the remaining buckets started and all waited for; each
//                           defined grads[i] := bucket sum / ranks, in its own dtype
// Reporting nothing and calling finish() alone reduces everything after backward (gradient
// accumulation, fault injection). The result does not depend on which gradients were reported
// early: the same f32 values go into the same buckets.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/dist/distributed.h"
#include "mixprec/core/tensor.h"

namespace mixprec::train {

// What gradients travel as between the ranks (--allreduce-dtype).
enum class WireDType { f32, bf16 };

struct ReducerOptions {
  int64_t bucket_bytes = int64_t(25) << 20;      // of f32 values (DDP's bucket_cap_mb = 25)
  int64_t first_bucket_bytes = int64_t(1) << 20;  // DDP's first bucket: 1 MB
  WireDType wire = WireDType::f32;
  // A parameter with at least this many bytes of f32 gradient is a bucket of its own, reduced
  // in place in its gradient when it can be (f32 on the wire, f32 contiguous gradient, step
  // weight 1): no copy into the bucket and back, only the division by the number of ranks.
  // 0: every parameter goes through the buckets.
  int64_t in_place_bytes = int64_t(1) << 20;
};

class GradientReducer {
 public:
  GradientReducer(dist::Communicator& comm, ReducerOptions options) : comm_(comm), options_(options) {}

  // The parameters' element counts, in the optimizer's order. Called again (with other
  // sizes) it lays the buckets out anew.
  void prepare(const std::vector<int64_t>& numels);
  bool prepared_for(const std::vector<int64_t>& numels) const { return numels == numels_; }
  int buckets() const { return int(buckets_.size()); }

  void begin(double weight, int64_t step);
  Status ready(size_t index, const Tensor& grad);
  Status finish(const std::vector<Tensor>& grads);
  // Time finish() spent waiting for the other ranks, this step (ms), and how many buckets
  // had started before finish() (during backward).
  double wait_ms() const { return wait_ms_; }
  int started_early() const { return started_early_; }

 private:
  struct Bucket {
    int64_t begin = 0, end = 0;  // its range of flat_
    int missing = 0;             // parameters not yet ready this step
    int alone = -1;              // the parameter that has this bucket to itself (in_place_bytes), or -1
    float* in_place = nullptr;   // this step: alone's gradient, reduced where it is
    std::unique_ptr<dist::PendingCollective> running;
  };
  // Makes parameter index's gradient ready for its bucket, in place (bucket alone, see
  // ReducerOptions::in_place_bytes) or copied into flat_, and counts it as ready.
  void take(size_t index, const Tensor& grad);
  void copy_in(size_t index, const Tensor& grad);
  Status start_ready_buckets();

  dist::Communicator& comm_;
  ReducerOptions options_;
  std::vector<int64_t> numels_, offset_;  // per parameter: its size and place in flat_
  std::vector<int> bucket_of_;
  std::vector<bool> is_ready_;
  std::vector<Bucket> buckets_;
  std::vector<float> flat_;
  std::vector<uint16_t> wire_;  // flat_ as bf16, for WireDType::bf16
  size_t next_to_start_ = 0;
  double weight_ = 1.0;
  int64_t step_ = 0;
  double wait_ms_ = 0.0;
  int started_early_ = 0;
};

}  // namespace mixprec::train
