// gradient_reducer.cpp: see gradient_reducer.h.
#include "train/gradient_reducer.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "core/convert.h"
#include "core/storage.h"

namespace mixprec::train {

void GradientReducer::prepare(const std::vector<int64_t>& numels) {
  numels_ = numels;
  const size_t n = numels.size();
  offset_.assign(n, 0);
  bucket_of_.assign(n, 0);
  buckets_.clear();
  int64_t at = 0;
  for (size_t k = n; k-- > 0;) {  // the last parameters first: backward's order
    const int64_t bytes = numels[k] * int64_t(sizeof(float));
    // No bucket size: one bucket, reduced after backward.
    const int64_t cap = options_.bucket_bytes <= 0                             ? INT64_MAX
                        : buckets_.size() <= 1 ? options_.first_bucket_bytes : options_.bucket_bytes;
    // (No bucket size means one bucket after backward: nothing is alone then.)
    const bool alone = options_.in_place_bytes > 0 && options_.bucket_bytes > 0 && bytes >= options_.in_place_bytes;
    if (buckets_.empty() || alone || buckets_.back().alone >= 0 ||
        ((buckets_.back().end - buckets_.back().begin) * int64_t(sizeof(float)) + bytes > cap &&
         buckets_.back().end > buckets_.back().begin)) {
      buckets_.emplace_back();
      buckets_.back().begin = buckets_.back().end = at;
      if (alone) buckets_.back().alone = int(k);
    }
    offset_[k] = at;
    at += numels[k];
    buckets_.back().end = at;
    bucket_of_[k] = int(buckets_.size()) - 1;
  }
  flat_.assign(size_t(at), 0.0f);
  wire_.assign(options_.wire == WireDType::bf16 ? size_t(at) : 0, 0);
  is_ready_.assign(n, false);
}

void GradientReducer::begin(double weight, int64_t step) {
  weight_ = weight;
  step_ = step;
  wait_ms_ = 0.0;
  next_to_start_ = 0;
  std::fill(is_ready_.begin(), is_ready_.end(), false);
  for (Bucket& b : buckets_) {
    b.missing = 0;
    b.in_place = nullptr;
    b.running.reset();
  }
  for (int b : bucket_of_) ++buckets_[size_t(b)].missing;
}

void GradientReducer::copy_in(size_t index, const Tensor& grad) {
  float* dst = flat_.data() + offset_[index];
  const int64_t n = numels_[index];
  if (!grad.defined()) {  // takes part as zeros (and stays undefined)
    std::fill(dst, dst + n, 0.0f);
    return;
  }
  MIXPREC_CHECK(grad.numel() == n, "gradient reducer: parameter " + std::to_string(index) + " has " +
                                       std::to_string(grad.numel()) + " gradient values, expected " +
                                       std::to_string(n));
  const Tensor c = grad.is_contiguous() ? grad : grad.contiguous();
  if (weight_ != 1.0 && c.dtype() == DType::f32) {  // weighted as it is copied: one pass
    const float* src = static_cast<const float*>(c.data());
    for (int64_t i = 0; i < n; ++i) dst[i] = float(double(src[i]) * weight_);
    return;
  }
  convert_elements(c.data(), c.dtype(), dst, DType::f32, n);
  if (weight_ != 1.0)
    for (int64_t i = 0; i < n; ++i) dst[i] = float(double(dst[i]) * weight_);
}

void GradientReducer::take(size_t index, const Tensor& grad) {
  Bucket& b = buckets_[size_t(bucket_of_[index])];
  if (b.alone == int(index) && options_.wire == WireDType::f32 && weight_ == 1.0 && grad.defined() &&
      grad.dtype() == DType::f32 && grad.is_contiguous() && grad.numel() == numels_[index])
    b.in_place = static_cast<float*>(const_cast<Tensor&>(grad).data());
  else
    copy_in(index, grad);
  is_ready_[index] = true;
  --b.missing;
}

Status GradientReducer::start_ready_buckets() {
  while (next_to_start_ < buckets_.size() && buckets_[next_to_start_].missing == 0) {
    Bucket& b = buckets_[next_to_start_];
    const std::string what = "gradient all-reduce (bucket " + std::to_string(next_to_start_ + 1) + " of " +
                             std::to_string(buckets_.size()) + ") at step " + std::to_string(step_);
    const size_t len = size_t(b.end - b.begin);
    auto started = [&] {
      if (b.in_place != nullptr) return comm_.start_allreduce_sum(std::span<float>(b.in_place, len), what);
      if (options_.wire == WireDType::f32)
        return comm_.start_allreduce_sum(std::span<float>(flat_.data() + b.begin, len), what);
      uint16_t* w = wire_.data() + b.begin;
      convert_elements(flat_.data() + b.begin, DType::f32, w, DType::bf16, int64_t(len));
      return comm_.start_allreduce_sum_bf16(std::span<uint16_t>(w, len), what);
    }();
    if (!started.is_ok()) return started.status();
    b.running = std::move(started).value();
    ++next_to_start_;
  }
  return Status::ok();
}

Status GradientReducer::ready(size_t index, const Tensor& grad) {
  MIXPREC_CHECK(index < numels_.size(), "gradient reducer: no parameter " + std::to_string(index));
  if (is_ready_[index]) return Status::ok();
  take(index, grad);
  MIXPREC_RETURN_IF_ERROR(start_ready_buckets());
  for (size_t k = 0; k < next_to_start_; ++k) (void)buckets_[k].running->test();  // lets MPI progress
  return Status::ok();
}

Status GradientReducer::finish(const std::vector<Tensor>& grads) {
  MIXPREC_CHECK(grads.size() == numels_.size(), "gradient reducer: " + std::to_string(grads.size()) +
                                                    " gradients for " + std::to_string(numels_.size()) +
                                                    " parameters");
  started_early_ = int(next_to_start_);
  for (size_t i = 0; i < grads.size(); ++i)
    if (!is_ready_[i]) take(i, grads[i]);
  MIXPREC_RETURN_IF_ERROR(start_ready_buckets());
  const auto t0 = std::chrono::steady_clock::now();
  for (Bucket& b : buckets_) MIXPREC_RETURN_IF_ERROR(b.running->wait());
  wait_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (options_.wire == WireDType::bf16)
    convert_elements(wire_.data(), DType::bf16, flat_.data(), DType::f32, int64_t(flat_.size()));
  // The mean: sum x (1 / ranks), exact for a power-of-two number of ranks, in the same pass
  // that writes each gradient back (the buffer is cold after MPI wrote it: one pass, not two).
  const float inv = float(1.0 / double(comm_.size()));
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g.defined()) continue;
    MIXPREC_CHECK(g.is_contiguous(), "gradient reducer: a parameter's gradient is not contiguous");
    float* sum = flat_.data() + offset_[i];
    const int64_t n = g.numel();
    if (float* where = buckets_[size_t(bucket_of_[i])].in_place; where != nullptr) {
      MIXPREC_CHECK(where == g.data(), "gradient reducer: parameter " + std::to_string(i) +
                                           "'s gradient was replaced while it was being reduced");
#pragma omp simd
      for (int64_t k = 0; k < n; ++k) where[k] *= inv;
    } else if (g.dtype() == DType::f32) {
      float* out = static_cast<float*>(const_cast<Tensor&>(g).data());
#pragma omp simd
      for (int64_t k = 0; k < n; ++k) out[k] = sum[k] * inv;
    } else {
      for (int64_t k = 0; k < n; ++k) sum[k] *= inv;
      convert_elements(sum, DType::f32, const_cast<Tensor&>(g).data(), g.dtype(), n);
    }
    g.storage()->bump_version();
  }
  return Status::ok();
}

}  // namespace mixprec::train
