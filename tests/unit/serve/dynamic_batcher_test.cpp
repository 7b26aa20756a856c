// dynamic_batcher_test.cpp: serve::DynamicBatcher stacks concurrent requests into one forward
// pass, gives every request its own rows back, bounds its queue, splits an oversized request,
// confines a model error to its batch and answers what is queued when stopped.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "mixprec/serve/serve.h"

namespace mixprec::serve {
namespace {

// A "model" whose output row for a sample is {sum of its values, batch size}; it records the
// batch sizes it saw, and can be held at a gate to let the queue fill.
struct FakeModel {
  std::mutex mu;
  std::vector<int64_t> batches;
  std::atomic<bool> hold{false};
  std::atomic<int> fail_next{0};
  BatchRunner runner(int64_t per_sample) {
    return [this, per_sample](const std::vector<float>& x, int64_t n) -> StatusOr<DynamicBatcher::Outputs> {
      while (hold.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      {
        std::lock_guard<std::mutex> lock(mu);
        batches.push_back(n);
      }
      if (fail_next.load() > 0) {
        --fail_next;
        return Status::internal("planted model failure");
      }
      EXPECT_EQ(int64_t(x.size()), n * per_sample);
      DynamicBatcher::Outputs out(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        float sum = 0;
        for (int64_t j = 0; j < per_sample; ++j) sum += x[size_t(i * per_sample + j)];
        out[size_t(i)] = {sum, float(n)};
      }
      return out;
    };
  }
  std::vector<int64_t> seen() {
    std::lock_guard<std::mutex> lock(mu);
    return batches;
  }
};

std::vector<std::vector<float>> samples_of(std::initializer_list<float> firsts, int64_t per_sample = 2) {
  std::vector<std::vector<float>> out;
  for (float f : firsts) out.push_back(std::vector<float>(size_t(per_sample), 0.f)), out.back()[0] = f;
  return out;
}

TEST(DynamicBatcher, ConcurrentRequestsShareOneForwardPassAndGetTheirOwnRows) {
  FakeModel model;
  // A long wait: the batch is released by reaching max_batch, not by the clock.
  DynamicBatcher batcher({.max_batch = 4, .max_wait_us = 10'000'000, .max_queue = 64}, 2, model.runner(2));
  std::vector<std::thread> clients;
  std::vector<DynamicBatcher::Outputs> got(4);
  // The four arrive together (as a server announces them when their headers are read).
  for (int c = 0; c < 4; ++c) batcher.arrival_started();
  for (int c = 0; c < 4; ++c)
    clients.emplace_back([&, c] {
      auto f = batcher.submit(samples_of({float(c + 1)}));
      batcher.arrival_finished();
      ASSERT_TRUE(f.is_ok());
      auto out = f->get();
      ASSERT_TRUE(out.is_ok());
      got[size_t(c)] = *out;
    });
  for (auto& t : clients) t.join();
  EXPECT_EQ(model.seen(), (std::vector<int64_t>{4}));
  for (int c = 0; c < 4; ++c) {
    ASSERT_EQ(got[size_t(c)].size(), 1u);
    EXPECT_EQ(got[size_t(c)][0], (std::vector<float>{float(c + 1), 4.f})) << c;
  }
}

TEST(DynamicBatcher, ALoneRequestDoesNotWaitForCompanyThatIsNotComing) {
  FakeModel model;
  DynamicBatcher batcher({.max_batch = 64, .max_wait_us = 60'000'000, .max_queue = 64}, 2, model.runner(2));
  const auto start = std::chrono::steady_clock::now();
  auto f = batcher.submit(samples_of({3.f}));
  ASSERT_TRUE(f.is_ok());
  ASSERT_TRUE(f->get().is_ok());
  // Nothing was arriving: it ran at once, not after the minute of --max-wait-us.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(DynamicBatcher, AQueuedRequestWaitsForOneStillArriving) {
  FakeModel model;
  DynamicBatcher batcher({.max_batch = 64, .max_wait_us = 60'000'000, .max_queue = 64}, 2, model.runner(2));
  batcher.arrival_started();  // A
  batcher.arrival_started();  // B
  auto a = batcher.submit(samples_of({1.f}));
  batcher.arrival_finished();
  ASSERT_TRUE(a.is_ok());
  // B is still being read: A waits for it.
  EXPECT_EQ(a->wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  auto b = batcher.submit(samples_of({2.f}));
  batcher.arrival_finished();
  ASSERT_TRUE(b.is_ok());
  auto out_a = a->get(), out_b = b->get();
  ASSERT_TRUE(out_a.is_ok() && out_b.is_ok());
  EXPECT_EQ(model.seen(), (std::vector<int64_t>{2}));  // one pass for both
  EXPECT_EQ((*out_b)[0], (std::vector<float>{2.f, 2.f}));
}

TEST(DynamicBatcher, AnArrivalThatNeverComesDelaysTheBatchByMaxWaitOnly) {
  FakeModel model;
  DynamicBatcher batcher({.max_batch = 64, .max_wait_us = 1000, .max_queue = 64}, 2, model.runner(2));
  batcher.arrival_started();  // announced, never submitted (its finish comes late)
  auto f = batcher.submit(samples_of({3.f, 5.f}));
  ASSERT_TRUE(f.is_ok());
  auto out = f->get();
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(*out, (DynamicBatcher::Outputs{{3.f, 2.f}, {5.f, 2.f}}));
  EXPECT_EQ(model.seen(), (std::vector<int64_t>{2}));
  batcher.arrival_finished();
}

TEST(DynamicBatcher, ARequestLargerThanABatchRunsInChunksInOrder) {
  FakeModel model;
  DynamicBatcher batcher({.max_batch = 2, .max_wait_us = 0, .max_queue = 64}, 2, model.runner(2));
  auto f = batcher.submit(samples_of({1.f, 2.f, 3.f, 4.f, 5.f}));
  ASSERT_TRUE(f.is_ok());
  auto out = f->get();
  ASSERT_TRUE(out.is_ok());
  ASSERT_EQ(out->size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ((*out)[size_t(i)][0], float(i + 1));
  EXPECT_EQ(model.seen(), (std::vector<int64_t>{2, 2, 1}));
}

TEST(DynamicBatcher, AFullQueueRefusesAtOnceAndRecovers) {
  FakeModel model;
  model.hold = true;  // the model thread takes the first request and stalls
  DynamicBatcher batcher({.max_batch = 1, .max_wait_us = 0, .max_queue = 3}, 2, model.runner(2));
  auto first = batcher.submit(samples_of({1.f}));
  ASSERT_TRUE(first.is_ok());
  while (batcher.queued_samples() != 0) std::this_thread::yield();  // taken by the model thread
  std::vector<std::future<StatusOr<DynamicBatcher::Outputs>>> waiting;
  for (int i = 0; i < 3; ++i) {
    auto f = batcher.submit(samples_of({2.f}));
    ASSERT_TRUE(f.is_ok()) << i;
    waiting.push_back(std::move(f).value());
  }
  EXPECT_EQ(batcher.queued_samples(), 3);
  auto refused = batcher.submit(samples_of({9.f}));
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::busy);
  EXPECT_NE(refused.status().message().find("queue is full (3 of 3 samples waiting"), std::string::npos);
  model.hold = false;
  EXPECT_TRUE(first->get().is_ok());
  for (auto& f : waiting) EXPECT_TRUE(f.get().is_ok());
  EXPECT_TRUE(batcher.submit(samples_of({9.f})).is_ok());
}

TEST(DynamicBatcher, AModelErrorAnswersItsBatchOnly) {
  FakeModel model;
  model.fail_next = 1;
  DynamicBatcher batcher({.max_batch = 8, .max_wait_us = 0, .max_queue = 64}, 2, model.runner(2));
  auto bad = batcher.submit(samples_of({1.f}));
  ASSERT_TRUE(bad.is_ok());
  auto out = bad->get();
  ASSERT_FALSE(out.is_ok());
  EXPECT_NE(out.status().message().find("planted model failure"), std::string::npos);
  auto good = batcher.submit(samples_of({4.f}));
  ASSERT_TRUE(good.is_ok());
  auto ok = good->get();
  ASSERT_TRUE(ok.is_ok());
  EXPECT_EQ((*ok)[0][0], 4.f);
}

TEST(DynamicBatcher, StopAnswersWhatIsQueuedThenRefuses) {
  FakeModel model;
  model.hold = true;
  DynamicBatcher batcher({.max_batch = 1, .max_wait_us = 0, .max_queue = 64}, 2, model.runner(2));
  std::vector<std::future<StatusOr<DynamicBatcher::Outputs>>> queued;
  for (int i = 0; i < 5; ++i) queued.push_back(std::move(batcher.submit(samples_of({float(i)}))).value());
  std::thread stopper([&] { batcher.stop(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  model.hold = false;
  stopper.join();
  for (int i = 0; i < 5; ++i) {
    auto out = queued[size_t(i)].get();
    ASSERT_TRUE(out.is_ok()) << i;
    EXPECT_EQ((*out)[0][0], float(i));
  }
  auto late = batcher.submit(samples_of({1.f}));
  ASSERT_FALSE(late.is_ok());
  EXPECT_EQ(late.status().code(), StatusCode::busy);
  EXPECT_NE(late.status().message().find("shutting down"), std::string::npos);
}

TEST(DynamicBatcher, RefusesSamplesOfTheWrongSize) {
  FakeModel model;
  DynamicBatcher batcher({}, 2, model.runner(2));
  auto r = batcher.submit({{1.f, 2.f, 3.f}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::invalid_argument);
  EXPECT_FALSE(batcher.submit({}).is_ok());
  EXPECT_TRUE(model.seen().empty());
}

}  // namespace
}  // namespace mixprec::serve
