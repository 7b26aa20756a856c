// gradient_reducer_test.cpp: the bucketed gradient reduction (src/train/gradient_reducer.h)
// against a recording two-rank communicator whose other rank contributes known values: the
// bucket layout (reverse parameter order, the small first bucket), that a bucket starts as
// soon as its last gradient is ready and never before an earlier bucket, that the result is
// the same whichever gradients were reported early, large gradients reduced where they are
// (and when they cannot be), and the bf16 wire's rounding.
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/core/half.h"
#include "train/gradient_reducer.h"

namespace mixprec::train {
namespace {

// Rank 0 of two; the "other rank" adds `other` to every element when a collective completes.
class RecordingComm final : public dist::Communicator {
 public:
  explicit RecordingComm(float other) : other_(other) {}
  struct Started {
    size_t elements;
    std::string what;
    const void* where;  // the buffer reduced
  };
  std::vector<Started> started;
  int completed = 0;

  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string backend() const override { return "recording"; }
  std::string host() const override { return "test"; }
  Status allreduce_sum(std::span<float>, const std::string&) override { return Status::ok(); }
  Status allreduce_sum(std::span<double>, const std::string&) override { return Status::ok(); }
  Status allreduce_max(std::span<int64_t>, const std::string&) override { return Status::ok(); }
  Status broadcast(std::span<uint8_t>, const std::string&) override { return Status::ok(); }
  StatusOr<std::vector<uint64_t>> allgather(uint64_t v, const std::string&) override {
    return std::vector<uint64_t>{v, v};
  }
  StatusOr<dist::StepAgreement> agree_on_step(int64_t, int64_t samples) override {
    return dist::StepAgreement{2 * samples};
  }
  [[noreturn]] void abort(int code) override { std::exit(code); }

  StatusOr<std::unique_ptr<dist::PendingCollective>> start_allreduce_sum(std::span<float> data,
                                                                         const std::string& what) override {
    started.push_back({data.size(), what, data.data()});
    return std::unique_ptr<dist::PendingCollective>(std::make_unique<Pending>(this, [data, this] {
      for (float& v : data) v += other_;
    }));
  }
  StatusOr<std::unique_ptr<dist::PendingCollective>> start_allreduce_sum_bf16(std::span<uint16_t> data,
                                                                              const std::string& what) override {
    started.push_back({data.size(), what, data.data()});
    return std::unique_ptr<dist::PendingCollective>(std::make_unique<Pending>(this, [data, this] {
      for (uint16_t& b : data)
        b = detail::float_to_bfloat16_bits(detail::bfloat16_bits_to_float(b) + other_);
    }));
  }

 private:
  struct Pending final : dist::PendingCollective {
    Pending(RecordingComm* c, std::function<void()> f) : comm(c), finish(std::move(f)) {}
    bool test() override { return done; }
    Status wait() override {
      if (!done) {
        finish();
        done = true;
        ++comm->completed;
      }
      return Status::ok();
    }
    RecordingComm* comm;
    std::function<void()> finish;
    bool done = false;
  };
  float other_;
};

Tensor filled(int64_t n, float v) { return Tensor::full({n}, v); }

TEST(GradientReducer, BucketsFollowBackwardOrderAndStartWhenComplete) {
  RecordingComm comm(1.0f);
  // 4-byte floats: first bucket 1 KiB (256 values), later ones 4 KiB (1024 values).
  GradientReducer r(comm, ReducerOptions{.bucket_bytes = 4096, .first_bucket_bytes = 1024});
  // Parameters 0..4; backward produces 4 first. 4 (200) fills the first bucket; 3 (100) does
  // not fit beside it; 3, 2 (900) do not fit in 4 KiB together with 1 (300): buckets
  // {4}, {3, 2}, {1, 0}.
  const std::vector<int64_t> sizes = {10, 300, 900, 100, 200};
  r.prepare(sizes);
  ASSERT_EQ(r.buckets(), 3);
  std::vector<Tensor> grads;
  for (size_t i = 0; i < sizes.size(); ++i) grads.push_back(filled(sizes[i], float(i + 1)));
  r.begin(1.0, 7);
  ASSERT_TRUE(r.ready(4, grads[4]).is_ok());
  ASSERT_EQ(comm.started.size(), 1u);  // bucket 1 goes at once
  EXPECT_EQ(comm.started[0].elements, 200u);
  EXPECT_EQ(comm.started[0].what, "gradient all-reduce (bucket 1 of 3) at step 7");
  ASSERT_TRUE(r.ready(0, grads[0]).is_ok());  // bucket 3 is not complete, and must wait for 2
  ASSERT_TRUE(r.ready(1, grads[1]).is_ok());  // bucket 3 complete, but bucket 2 is not started
  EXPECT_EQ(comm.started.size(), 1u);
  ASSERT_TRUE(r.ready(3, grads[3]).is_ok());
  ASSERT_TRUE(r.ready(2, grads[2]).is_ok());  // bucket 2 complete: 2 and then 3 start, in order
  ASSERT_EQ(comm.started.size(), 3u);
  EXPECT_EQ(comm.started[1].elements, 1000u);
  EXPECT_EQ(comm.started[2].elements, 310u);
  EXPECT_EQ(comm.completed, 0);  // nothing waited for during "backward"
  ASSERT_TRUE(r.finish(grads).is_ok());
  EXPECT_EQ(comm.completed, 3);
  for (size_t i = 0; i < sizes.size(); ++i)  // (mine + the other rank's 1) / 2
    for (float v : grads[i].to_vector()) ASSERT_EQ(v, (float(i + 1) + 1.0f) / 2.0f) << "parameter " << i;
}

TEST(GradientReducer, SameResultWhetherReportedEarlyOrAllAtTheEnd) {
  const std::vector<int64_t> sizes = {5, 700, 3};
  auto run = [&](bool early) {
    RecordingComm comm(0.25f);
    GradientReducer r(comm, ReducerOptions{.bucket_bytes = 2048, .first_bucket_bytes = 64});
    r.prepare(sizes);
    std::vector<Tensor> grads;
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::vector<float> v(static_cast<size_t>(sizes[i]));
      for (size_t j = 0; j < v.size(); ++j) v[j] = std::sin(float(i * 1000 + j)) * 3.0f;
      grads.push_back(Tensor::from_vector(v, {sizes[i]}));
    }
    r.begin(0.75, 1);  // a rank with 3/4 of an even share of the samples
    if (early)
      for (size_t i = grads.size(); i-- > 0;) EXPECT_TRUE(r.ready(i, grads[i]).is_ok());
    EXPECT_TRUE(r.finish(grads).is_ok());
    std::vector<float> all;
    for (const Tensor& g : grads)
      for (float v : g.to_vector()) all.push_back(v);
    return all;
  };
  const std::vector<float> early = run(true), late = run(false);
  ASSERT_EQ(early.size(), 708u);
  EXPECT_EQ(early, late);
  EXPECT_EQ(early[0], float((double(std::sin(0.0f) * 3.0f) * 0.75 + 0.25) / 2.0));
}

TEST(GradientReducer, UndefinedGradientsTakePartAsZerosAndStayUndefined) {
  RecordingComm comm(2.0f);
  GradientReducer r(comm, ReducerOptions{});
  r.prepare({2, 3});
  std::vector<Tensor> grads = {Tensor(), filled(3, 4.0f)};
  r.begin(1.0, 1);
  ASSERT_TRUE(r.finish(grads).is_ok());
  EXPECT_FALSE(grads[0].defined());
  EXPECT_EQ(grads[1].to_vector(), (std::vector<float>{3.0f, 3.0f, 3.0f}));
  ASSERT_EQ(comm.started.size(), 1u);  // one 5-value bucket: the zeros travelled too
  EXPECT_EQ(comm.started[0].elements, 5u);
}

TEST(GradientReducer, NoBucketSizeMeansOneBucketAfterBackward) {
  RecordingComm comm(0.0f);
  GradientReducer r(comm, ReducerOptions{.bucket_bytes = 0, .first_bucket_bytes = 0});
  r.prepare({1000000, 1000000, 7});
  EXPECT_EQ(r.buckets(), 1);
}

// Parameter 1 (300 values, 1200 bytes) is at least in_place_bytes: a bucket of its own,
// between the buckets of 2 and of 0.
std::vector<Tensor> large_middle_grads() { return {filled(10, 1.0f), filled(300, 5.0f), filled(20, 3.0f)}; }

TEST(GradientReducer, LargeGradientsAreReducedWhereTheyAre) {
  RecordingComm comm(1.0f);
  GradientReducer r(comm, ReducerOptions{.in_place_bytes = 1024});
  r.prepare({10, 300, 20});
  ASSERT_EQ(r.buckets(), 3);
  std::vector<Tensor> grads = large_middle_grads();
  const void* large = grads[1].data();
  r.begin(1.0, 1);
  ASSERT_TRUE(r.ready(2, grads[2]).is_ok());
  ASSERT_TRUE(r.ready(1, grads[1]).is_ok());
  ASSERT_EQ(comm.started.size(), 2u);  // the large one starts as soon as it is ready
  EXPECT_EQ(comm.started[1].elements, 300u);
  EXPECT_EQ(comm.started[1].where, large);  // its own buffer, not a bucket copy
  EXPECT_NE(comm.started[0].where, grads[2].data());
  ASSERT_TRUE(r.finish(grads).is_ok());
  EXPECT_EQ(grads[1].data(), large);
  EXPECT_EQ(grads[0].to_vector(), std::vector<float>(10, 1.0f));  // (1 + 1) / 2
  EXPECT_EQ(grads[1].to_vector(), std::vector<float>(300, 3.0f));  // (5 + 1) / 2
  EXPECT_EQ(grads[2].to_vector(), std::vector<float>(20, 2.0f));
}

TEST(GradientReducer, LargeGradientsGoThroughTheBucketWhenTheyCannotStayInPlace) {
  // A step weight other than 1 (a rank's uneven share) scales as the gradient is copied; a
  // bf16 wire converts; a bf16 gradient is not f32. The values are those of the bucket path.
  struct Case {
    const char* name;
    double weight;
    WireDType wire;
    DType dtype;
    float expected;  // parameter 1's value after the reduction: (5 w + 1) / 2
  };
  for (const Case& c : {Case{"weight 0.5", 0.5, WireDType::f32, DType::f32, 1.75f},
                        Case{"bf16 wire", 1.0, WireDType::bf16, DType::f32, 3.0f},
                        Case{"bf16 gradient", 1.0, WireDType::f32, DType::bf16, 3.0f}}) {
    SCOPED_TRACE(c.name);
    RecordingComm comm(1.0f);
    GradientReducer r(comm, ReducerOptions{.wire = c.wire, .in_place_bytes = 1024});
    r.prepare({10, 300, 20});
    std::vector<Tensor> grads = large_middle_grads();
    grads[1] = grads[1].to(c.dtype);
    r.begin(c.weight, 1);
    ASSERT_TRUE(r.finish(grads).is_ok());
    ASSERT_EQ(comm.started.size(), 3u);
    EXPECT_NE(comm.started[1].where, grads[1].data());
    EXPECT_EQ(grads[1].to(DType::f32).to_vector(), std::vector<float>(300, c.expected));
  }
}

TEST(GradientReducer, Bf16WireRoundsWhatTravelsAndTheSum) {
  RecordingComm comm(1.0f);
  GradientReducer r(comm, ReducerOptions{.wire = WireDType::bf16});
  r.prepare({3});
  // 1 + 2^-10 is not a bf16 (8 significant bits): it travels as 1; 300.5 travels as 300
  // (bf16's step there is 2) and 300 + 1 rounds to 300 again (ties to even).
  std::vector<Tensor> grads = {Tensor::from_vector({1.0f + 0x1p-10f, 300.5f, -0.5f}, {3})};
  r.begin(1.0, 1);
  ASSERT_TRUE(r.finish(grads).is_ok());
  EXPECT_EQ(grads[0].to_vector(), (std::vector<float>{1.0f, 150.0f, 0.25f}));
}

}  // namespace
}  // namespace mixprec::train
