// batch_norm_sync_test.cpp: --sync-bn's BatchNorm (include/mixprec/backend/batch_norm_sync.h). Two
// threads stand in for two processes, each with its own half of a batch and its own
// BatchNormSyncGuard (thread-local, as on a rank), summing through a shared exchange. The
// reference is one batch_norm over the whole batch: the outputs, the running statistics, the
// input gradients and the averaged weight/bias gradients must be those of the whole batch.
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <mutex>
#include <thread>

#include "mixprec/autograd/autograd.h"
#include "mixprec/backend/batch_norm_sync.h"
#include "mixprec/ops/ops.h"

namespace mixprec {
namespace {

// An all-reduce (sum) between two threads: both add their values, wait for each other,
// read the total, and wait again before the buffer is reused.
class TwoThreadSum {
 public:
  void sum(int who, std::span<double> v) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      part_[who].assign(v.begin(), v.end());
    }
    sync_.arrive_and_wait();
    // Both parts in the same order on both threads: identical totals.
    for (size_t i = 0; i < v.size(); ++i) v[i] = part_[0][i] + part_[1][i];
    sync_.arrive_and_wait();
  }

 private:
  std::mutex mu_;
  std::vector<double> part_[2];
  std::barrier<> sync_{2};
};

std::vector<double> values(int64_t n, double seed) {
  std::vector<double> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(seed + 0.37 * double(i)) * 2.0 + 0.5 * seed;
  return v;
}

Tensor slice_rows(const Tensor& t, int64_t begin, int64_t end) {
  const std::vector<double> all = t.to_vector_f64();
  const int64_t row = t.numel() / t.size(0);
  Shape s = t.shape();
  s[0] = end - begin;
  return Tensor::from_vector_f64({all.begin() + begin * row, all.begin() + end * row}, s, DType::f64);
}

void expect_near(const std::vector<double>& a, const std::vector<double>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-12 * (1.0 + std::abs(b[i]))) << what << " [" << i << "]";
}

TEST(BatchNormSync, TwoHalvesNormaliseAndDifferentiateAsTheWholeBatch) {
  const int64_t N = 6, C = 3, H = 2, W = 2;  // each "process" holds 3 samples
  const Shape shape{N, C, H, W};
  const Tensor x = Tensor::from_vector_f64(values(N * C * H * W, 1.0), shape, DType::f64);
  const Tensor g = Tensor::from_vector_f64(values(N * C * H * W, 5.0), shape, DType::f64);  // d loss / d y
  const std::vector<double> w0 = {0.5, 1.5, -1.0}, b0 = {0.1, -0.2, 0.3};

  // The reference: one process, the whole batch, loss = sum(y * g) / 2 (the mean of the two
  // halves' losses, which is what averaging two ranks' gradients trains on).
  Tensor w = Tensor::from_vector_f64(w0, {C}, DType::f64), b = Tensor::from_vector_f64(b0, {C}, DType::f64);
  w.requires_grad_(true);
  b.requires_grad_(true);
  Tensor xr = x.clone();
  xr.requires_grad_(true);
  Tensor rm = Tensor::zeros({C}, DType::f64), rv = Tensor::ones({C}, DType::f64);
  const Tensor y = batch_norm(xr, rm, rv, w, b, /*training=*/true, 0.1, 1e-5);
  mul(sum(mul(y, g)), 0.5).backward();

  // Two "ranks", each on its half, with the statistics summed between them.
  TwoThreadSum exchange;
  struct Rank {
    Tensor y, dx, dw, db, rm, rv;
  } ranks[2];
  auto run_rank = [&](int r) {
    auto sync = std::make_shared<BatchNormSync>();
    sync->sum_statistics = [&exchange, r](std::span<double> v) { exchange.sum(r, v); };
    // Each rank's gradients count 1/2 in the average: so do its shares of the sums.
    sync->sum_gradients = [&exchange, r](std::span<double> v) {
      for (double& e : v) e *= 0.5;
      exchange.sum(r, v);
      for (double& e : v) e /= 0.5;
    };
    BatchNormSyncGuard guard(sync);
    Tensor wr = Tensor::from_vector_f64(w0, {C}, DType::f64), br = Tensor::from_vector_f64(b0, {C}, DType::f64);
    wr.requires_grad_(true);
    br.requires_grad_(true);
    Tensor xh = slice_rows(x, r * 3, r * 3 + 3);
    xh.requires_grad_(true);
    Rank& me = ranks[r];
    me.rm = Tensor::zeros({C}, DType::f64);
    me.rv = Tensor::ones({C}, DType::f64);
    me.y = batch_norm(xh, me.rm, me.rv, wr, br, true, 0.1, 1e-5);
    sum(mul(me.y, slice_rows(g, r * 3, r * 3 + 3))).backward();  // this rank's own loss
    me.dx = xh.grad();
    me.dw = wr.grad();
    me.db = br.grad();
  };
  std::thread t0(run_rank, 0), t1(run_rank, 1);
  t0.join();
  t1.join();

  for (int r = 0; r < 2; ++r) {
    expect_near(ranks[r].y.to_vector_f64(), slice_rows(y.detach(), r * 3, r * 3 + 3).to_vector_f64(), "y");
    expect_near(ranks[r].rm.to_vector_f64(), rm.to_vector_f64(), "running_mean");
    expect_near(ranks[r].rv.to_vector_f64(), rv.to_vector_f64(), "running_var (unbiased over all 24 values)");
    // The averaging of gradients halves a rank's dx contribution: dx / 2 is the whole batch's.
    std::vector<double> half = ranks[r].dx.to_vector_f64();
    for (double& v : half) v *= 0.5;
    expect_near(half, slice_rows(xr.grad(), r * 3, r * 3 + 3).to_vector_f64(), "dx");
  }
  // Weight and bias gradients are each rank's own; their average is the whole batch's.
  auto average = [](const Tensor& a, const Tensor& c) {
    std::vector<double> v = a.to_vector_f64(), u = c.to_vector_f64();
    for (size_t i = 0; i < v.size(); ++i) v[i] = (v[i] + u[i]) / 2.0;
    return v;
  };
  expect_near(average(ranks[0].dw, ranks[1].dw), w.grad().to_vector_f64(), "dw");
  expect_near(average(ranks[0].db, ranks[1].db), b.grad().to_vector_f64(), "db");

  // Without the guard a half normalises with its own statistics: not the whole batch's (the
  // comparison above has something to find).
  Tensor alone = batch_norm(slice_rows(x, 0, 3), Tensor(), Tensor(), Tensor(), Tensor(), true);
  Tensor whole = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true);
  EXPECT_GT(std::abs(alone.to_vector_f64()[0] - whole.to_vector_f64()[0]), 1e-3);
}

TEST(BatchNormSync, EvaluationNeverCallsTheSums) {
  auto sync = std::make_shared<BatchNormSync>();
  int calls = 0;
  sync->sum_statistics = sync->sum_gradients = [&calls](std::span<double>) { ++calls; };
  BatchNormSyncGuard guard(sync);
  const Tensor x = Tensor::from_vector_f64(values(2 * 3 * 4, 2.0), {2, 3, 4}, DType::f64);
  (void)batch_norm(x, Tensor::zeros({3}, DType::f64), Tensor::ones({3}, DType::f64), Tensor(), Tensor(), false);
  EXPECT_EQ(calls, 0);
  (void)batch_norm(x, Tensor::zeros({3}, DType::f64), Tensor::ones({3}, DType::f64), Tensor(), Tensor(), true);
  EXPECT_EQ(calls, 2);  // the sums, then the squared deviations from the global mean
}

}  // namespace
}  // namespace mixprec
