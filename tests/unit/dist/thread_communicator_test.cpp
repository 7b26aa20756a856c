// thread_communicator_test.cpp: ranks as threads of one process (make_thread_communicators):
// every collective against values computed here by hand, sums in rank order (the order is
// visible in float), bf16 sums rounded pair by pair, collectives started and finished later,
// the step rendezvous, a rank that never arrives (named after the timeout), and DataParallel's
// gradient reduction over two thread ranks.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <thread>

#include "mixprec/core/half.h"
#include "mixprec/dist/distributed.h"
#include "train/data_parallel.h"

namespace mixprec::dist {
namespace {

// Runs body(rank, communicator) on one thread per rank and waits for all.
void on_ranks(int n, const std::function<void(int, Communicator&)>& body, double timeout = 30.0) {
  auto comms = make_thread_communicators(n);
  ASSERT_EQ(comms.size(), size_t(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    comms[size_t(r)]->set_timeout(timeout);
    threads.emplace_back([&, r] { body(r, *comms[size_t(r)]); });
  }
  for (auto& t : threads) t.join();
}

TEST(ThreadCommunicator, RanksSizesAndBackend) {
  auto comms = make_thread_communicators(3);
  ASSERT_EQ(comms.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(comms[size_t(r)]->rank(), r);
    EXPECT_EQ(comms[size_t(r)]->size(), 3);
    EXPECT_EQ(comms[size_t(r)]->backend(), "threads");
  }
  EXPECT_TRUE(make_thread_communicators(0).empty());
}

TEST(ThreadCommunicator, FloatSumsAreTakenInRankOrder) {
  // ((1e8 + 1) + -1e8) is 0 in float (1e8 + 1 rounds to 1e8); any other order gives 1.
  const float in[3] = {1e8f, 1.0f, -1e8f};
  const float expected = (in[0] + in[1]) + in[2];
  ASSERT_EQ(expected, 0.0f);
  std::vector<std::vector<float>> out(3);
  on_ranks(3, [&](int r, Communicator& c) {
    std::vector<float> v = {in[r], float(r + 1)};
    ASSERT_TRUE(c.allreduce_sum(std::span<float>(v), "test sum").is_ok());
    out[size_t(r)] = v;
  });
  for (const auto& v : out) EXPECT_EQ(v, (std::vector<float>{expected, 6.0f}));
}

TEST(ThreadCommunicator, RankOrderHoldsAcrossTheVectorBlocks) {
  // The rank-order case again at every position of a buffer longer than the reduction's
  // blocks and not a multiple of them (3 and 4 ranks); 2 ranks (their own loop) against the
  // float sum of the pair, and NaN and infinities carried through.
  for (int ranks : {2, 3, 4}) {
    constexpr size_t kN = 2 * 512 + 77;
    const float in[4] = {1e8f, 1.0f, -1e8f, 0.5f};
    float expected = in[0];
    for (int r = 1; r < ranks; ++r) expected += in[r];
    std::vector<std::vector<float>> out(static_cast<size_t>(ranks));
    on_ranks(ranks, [&](int r, Communicator& c) {
      std::vector<float> v(kN, in[r]);
      v[kN - 1] = r == 0 ? std::numeric_limits<float>::infinity() : float(r);
      v[kN / 2] = r == ranks - 1 ? std::numeric_limits<float>::quiet_NaN() : 1.0f;
      ASSERT_TRUE(c.allreduce_sum(std::span<float>(v), "test sum").is_ok());
      out[size_t(r)] = std::move(v);
    });
    for (const auto& v : out)
      for (size_t i = 0; i < kN; ++i) {
        if (i == kN / 2) EXPECT_TRUE(std::isnan(v[i])) << ranks << " ranks";
        else if (i == kN - 1) EXPECT_EQ(v[i], std::numeric_limits<float>::infinity()) << ranks << " ranks";
        else ASSERT_EQ(v[i], expected) << ranks << " ranks, element " << i;
      }
  }
}

TEST(ThreadCommunicator, LargeBuffersAreReducedWholeWhoeverTakesTheChunks) {
  // More elements than several chunks of the shared reduction, odd-sized, one rank starting
  // its collective and waiting later: every element the sum of the three ranks' values.
  constexpr size_t kN = 3 * 65536 + 17;
  std::vector<std::vector<float>> out(3);
  on_ranks(3, [&](int r, Communicator& c) {
    std::vector<float> v(kN);
    for (size_t i = 0; i < kN; ++i) v[i] = float(int64_t(i % 1000) * (r + 1));
    if (r == 1) {
      auto p = c.start_allreduce_sum(std::span<float>(v), "bucket");
      ASSERT_TRUE(p.is_ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the others start the chunks
      ASSERT_TRUE((*p)->wait().is_ok());
    } else {
      ASSERT_TRUE(c.allreduce_sum(std::span<float>(v), "bucket").is_ok());
    }
    out[size_t(r)] = std::move(v);
  });
  for (const auto& v : out)
    for (size_t i = 0; i < kN; ++i) ASSERT_EQ(v[i], float(int64_t(i % 1000) * 6)) << i;
}

TEST(ThreadCommunicator, DoubleSumMaxBroadcastAllgather) {
  std::vector<std::vector<double>> sums(2);
  std::vector<std::vector<int64_t>> maxes(2);
  std::vector<std::vector<uint8_t>> bytes(2);
  std::vector<std::vector<uint64_t>> gathered(2);
  on_ranks(2, [&](int r, Communicator& c) {
    std::vector<double> d = {0.25 * (r + 1), -1.0};
    ASSERT_TRUE(c.allreduce_sum(std::span<double>(d), "double sum").is_ok());
    std::vector<int64_t> m = {r == 0 ? 7 : -3, r == 0 ? -5 : 11};
    ASSERT_TRUE(c.allreduce_max(std::span<int64_t>(m), "max").is_ok());
    std::vector<uint8_t> b = {uint8_t(10 + r), uint8_t(20 + r), uint8_t(30 + r)};
    ASSERT_TRUE(c.broadcast(std::span<uint8_t>(b), "broadcast").is_ok());
    auto all = c.allgather(uint64_t(100 + r), "allgather");
    ASSERT_TRUE(all.is_ok());
    sums[size_t(r)] = d;
    maxes[size_t(r)] = m;
    bytes[size_t(r)] = b;
    gathered[size_t(r)] = *all;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(sums[size_t(r)], (std::vector<double>{0.75, -2.0}));
    EXPECT_EQ(maxes[size_t(r)], (std::vector<int64_t>{7, 11}));
    EXPECT_EQ(bytes[size_t(r)], (std::vector<uint8_t>{10, 20, 30}));  // rank 0's
    EXPECT_EQ(gathered[size_t(r)], (std::vector<uint64_t>{100, 101}));
  }
}

TEST(ThreadCommunicator, Bf16SumsRoundEachPairOnce) {
  // Three ranks: (a + b) rounded to bf16, then + c rounded again (the MPI reduction's rule).
  const float a = 1.0f, b = 1.0f / 256, c = 1.0f / 256;
  const uint16_t ab = detail::float_to_bfloat16_bits(a + b);  // 1 + 2^-8 is a tie: rounds to 1
  const uint16_t expected = detail::float_to_bfloat16_bits(detail::bfloat16_bits_to_float(ab) + c);
  // Summed in f32 first, the answer would differ: 1 + 2^-7 is a bf16 value.
  ASSERT_NE(expected, detail::float_to_bfloat16_bits(a + b + c));
  const float in[3] = {a, b, c};
  std::vector<uint16_t> out(3);
  on_ranks(3, [&](int r, Communicator& comm) {
    std::vector<uint16_t> v = {detail::float_to_bfloat16_bits(in[r])};
    auto pending = comm.start_allreduce_sum_bf16(std::span<uint16_t>(v), "bf16 bucket");
    ASSERT_TRUE(pending.is_ok());
    ASSERT_TRUE((*pending)->wait().is_ok());
    out[size_t(r)] = v[0];
  });
  for (uint16_t v : out) EXPECT_EQ(v, expected);
}

TEST(ThreadCommunicator, StartedCollectivesCompleteWhenTheLastRankArrives) {
  std::atomic<bool> rank1_may_start{false};
  std::vector<float> r0 = {1.0f, 2.0f}, r1 = {10.0f, 20.0f};
  bool incomplete_before = false, complete_after = false;
  on_ranks(2, [&](int r, Communicator& c) {
    if (r == 0) {
      auto p = c.start_allreduce_sum(std::span<float>(r0), "bucket 0");
      ASSERT_TRUE(p.is_ok());
      incomplete_before = !(*p)->test();  // rank 1 has not posted yet
      rank1_may_start = true;
      ASSERT_TRUE((*p)->wait().is_ok());
      complete_after = (*p)->test();
    } else {
      while (!rank1_may_start) std::this_thread::yield();
      auto p = c.start_allreduce_sum(std::span<float>(r1), "bucket 0");
      ASSERT_TRUE(p.is_ok());
      ASSERT_TRUE((*p)->wait().is_ok());
    }
  });
  EXPECT_TRUE(incomplete_before);
  EXPECT_TRUE(complete_after);
  EXPECT_EQ(r0, (std::vector<float>{11.0f, 22.0f}));
  EXPECT_EQ(r1, (std::vector<float>{11.0f, 22.0f}));
}

TEST(ThreadCommunicator, ManyInterleavedCollectivesStayMatched) {
  // Four ranks, 300 rounds of a started sum, a blocking max and a finished-late sum: each
  // rank's k-th call meets the others' k-th, whatever the threads' timing.
  constexpr int kRanks = 4, kRounds = 300;
  std::atomic<int> wrong{0};
  on_ranks(kRanks, [&](int r, Communicator& c) {
    for (int k = 0; k < kRounds; ++k) {
      std::vector<float> a(17, float(r + k));
      auto p = c.start_allreduce_sum(std::span<float>(a), "a");
      std::vector<int64_t> m = {int64_t(r * k)};
      if (!c.allreduce_max(std::span<int64_t>(m), "m").is_ok() || m[0] != int64_t((kRanks - 1) * k)) ++wrong;
      if (!p.is_ok() || !(*p)->wait().is_ok()) ++wrong;
      for (float x : a)
        if (x != float(kRanks * k + kRanks * (kRanks - 1) / 2)) ++wrong;
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST(ThreadCommunicator, StepRendezvousTotalsSamplesAndNamesRanksOutOfStep) {
  std::vector<int64_t> totals(3, -1);
  on_ranks(3, [&](int r, Communicator& c) {
    auto a = c.agree_on_step(5, 10 + r);
    ASSERT_TRUE(a.is_ok()) << a.status().message();
    totals[size_t(r)] = a->total_samples;
  });
  EXPECT_EQ(totals, (std::vector<int64_t>{33, 33, 33}));
  std::vector<std::string> errors(2);
  on_ranks(2, [&](int r, Communicator& c) {
    auto a = c.agree_on_step(r == 0 ? 7 : 8, 4);
    ASSERT_FALSE(a.is_ok());
    errors[size_t(r)] = a.status().message();
  });
  EXPECT_NE(errors[0].find("rank 1 is at step 8"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("rank 0 is at step 7"), std::string::npos) << errors[1];
}

TEST(ThreadCommunicator, ARankThatNeverArrivesIsNamedAfterTheTimeout) {
  Status st;
  on_ranks(
      3,
      [&](int r, Communicator& c) {
        if (r == 2) return;  // never calls the collective
        std::vector<float> v = {1.0f};
        const Status s = c.allreduce_sum(std::span<float>(v), "the gradient all-reduce at step 3");
        if (r == 0) st = s;
      },
      /*timeout=*/0.2);
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.code(), StatusCode::distributed);
  EXPECT_NE(st.message().find("the gradient all-reduce at step 3"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("worker rank(s) 2 did not arrive"), std::string::npos) << st.message();
}

TEST(ThreadCommunicator, DataParallelAveragesGradientsOverThreadRanks) {
  // Two ranks with unequal shares (weights 0.5 and 1.5 of the mean share): each p.grad :=
  // (0.5 g0 + 1.5 g1) / 2 on both, and the loss the same weighted mean.
  const std::vector<float> g0 = {1.0f, -2.0f, 4.0f}, g1 = {3.0f, 0.5f, -8.0f};
  std::vector<std::vector<float>> out(2);
  std::vector<double> losses(2);
  on_ranks(2, [&](int r, Communicator& c) {
    train::DataParallel dp(c);
    Tensor p = Tensor::zeros({3});
    p.mutable_grad() = Tensor::from_vector(r == 0 ? g0 : g1, {3});
    const double weight = r == 0 ? 0.5 : 1.5;
    ASSERT_TRUE(dp.reduce_gradients({p}, weight, 1).is_ok());
    out[size_t(r)] = p.grad().to_vector();
    auto loss = dp.mean_loss(r == 0 ? 2.0 : 4.0, weight, 1);
    ASSERT_TRUE(loss.is_ok());
    losses[size_t(r)] = *loss;
  });
  std::vector<float> expected(3);
  for (size_t i = 0; i < 3; ++i) expected[i] = float((0.5 * g0[i] + 1.5 * g1[i]) / 2.0);
  EXPECT_EQ(out[0], expected);
  EXPECT_EQ(out[1], expected);
  EXPECT_EQ(losses[0], (0.5 * 2.0 + 1.5 * 4.0) / 2.0);
  EXPECT_EQ(losses[1], losses[0]);
}

}  // namespace
}  // namespace mixprec::dist
