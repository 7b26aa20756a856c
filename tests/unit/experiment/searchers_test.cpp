// searchers_test.cpp: the searchers against their definitions (mixprec/experiment/experiment.h). Grid:
// every point of the cartesian product once, the ranges' points as defined. Random: the same
// seed draws the same trials, values stay in their ranges, integers are equally likely and a
// log range is uniform in log space. ASHA (Li et al. 2018, Algorithm 2): promotions and early
// stops checked step by step against rungs computed by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "mixprec/experiment/experiment.h"

namespace mixprec::experiment {
namespace {

Hyperparameter range(const char* name, Hyperparameter::Kind kind, double min, double max, int64_t count = 0) {
  Hyperparameter h;
  h.name = name, h.kind = kind, h.min = min, h.max = max, h.count = count;
  return h;
}
Hyperparameter choice(const char* name, std::vector<std::string> values) {
  Hyperparameter h;
  h.name = name, h.kind = values.size() == 1 ? Hyperparameter::Kind::constant : Hyperparameter::Kind::categorical;
  h.values = std::move(values);
  return h;
}
using K = Hyperparameter::Kind;

TEST(GridSearch, RangePointsAreEvenlySpacedWithExactEnds) {
  EXPECT_EQ(grid_values(range("batch_size", K::int_range, 1, 5, 3)), (std::vector<std::string>{"1", "3", "5"}));
  EXPECT_EQ(grid_values(range("batch_size", K::int_range, 1, 2, 5)), (std::vector<std::string>{"1", "2"}));  // no repeats
  EXPECT_EQ(grid_values(range("lr", K::double_range, 0, 1, 5)),
            (std::vector<std::string>{"0.0", "0.25", "0.5", "0.75", "1.0"}));
  const std::vector<std::string> log = grid_values(range("lr", K::log_range, 1e-4, 1, 5));
  ASSERT_EQ(log.size(), 5u);
  EXPECT_EQ(log.front(), "0.0001");
  EXPECT_EQ(log.back(), "1.0");
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(std::log10(std::stod(log[size_t(i)])), -4.0 + i, 1e-12) << log[size_t(i)];
  EXPECT_EQ(grid_values(range("lr", K::double_range, 0.5, 0.9, 1)), (std::vector<std::string>{"0.5"}));
}

TEST(GridSearch, CoversTheWholeCartesianProductOnce) {
  const std::vector<Hyperparameter> hs = {range("lr", K::log_range, 1e-3, 1e-1, 3),
                                          choice("optimizer", {"\"adam\"", "\"sgd\""}), choice("seed", {"4"}),
                                          range("batch_size", K::int_range, 16, 64, 4)};
  const std::vector<Assignment> points = grid_points(hs);
  ASSERT_EQ(points.size(), 3u * 2u * 1u * 4u);
  std::set<Assignment> seen(points.begin(), points.end());
  EXPECT_EQ(seen.size(), points.size());  // no point twice
  // Every combination of the per-hyperparameter values is there (independent nested loops).
  for (const std::string& lr : grid_values(hs[0]))
    for (const std::string& opt : {"\"adam\"", "\"sgd\""})
      for (const std::string& bs : {"16", "32", "48", "64"})
        EXPECT_EQ(seen.count({{"lr", lr}, {"optimizer", opt}, {"seed", "4"}, {"batch_size", bs}}), 1u) << lr << opt << bs;
  // The last hyperparameter varies fastest.
  EXPECT_EQ(points[0].back().second, "16");
  EXPECT_EQ(points[1].back().second, "32");
  EXPECT_EQ(points[0][0], points[7][0]);
}

TEST(RandomSearch, ReproducibleBySeedAndIndependentOfOrder) {
  const std::vector<Hyperparameter> hs = {range("lr", K::log_range, 1e-5, 1), range("batch_size", K::int_range, 8, 512),
                                          choice("optimizer", {"\"adam\"", "\"sgd\"", "\"adamw\""})};
  for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(random_point(hs, 42, i), random_point(hs, 42, i));
  int differ_by_seed = 0, differ_by_index = 0;
  for (int64_t i = 0; i < 50; ++i) {
    differ_by_seed += random_point(hs, 42, i) != random_point(hs, 43, i);
    differ_by_index += random_point(hs, 42, i) != random_point(hs, 42, i + 1);
  }
  EXPECT_EQ(differ_by_seed, 50);
  EXPECT_EQ(differ_by_index, 50);
  // The generator against an independent computation of its definition (SplitMix64 of
  // SplitMix64(SplitMix64(seed) ^ index) ^ position, top 53 bits / 2^53, done in Python): the
  // values a file draws are the same with any compiler and standard library.
  const std::vector<Hyperparameter> unit = {range("a", K::double_range, 0, 1), range("b", K::double_range, 0, 1)};
  EXPECT_EQ(std::stod(random_point(unit, 0, 0)[0].second), 0.13870941014555427);
  EXPECT_EQ(std::stod(random_point(unit, 42, 3)[1].second), 0.36415765075023543);
}

TEST(RandomSearch, ValuesStayInRangeWithTheirDistributions) {
  const std::vector<Hyperparameter> hs = {range("lr", K::log_range, 1e-4, 1), range("warmup_steps", K::int_range, 1, 5),
                                          range("weight_decay", K::double_range, 0, 1),
                                          choice("optimizer", {"\"adam\"", "\"sgd\""}), choice("epochs", {"3"})};
  const int n = 20000;
  std::map<std::string, int> ints, opts;
  int decade[4] = {0, 0, 0, 0};
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    const Assignment a = random_point(hs, 9, i);
    const double lr = std::stod(a[0].second);
    ASSERT_GE(lr, 1e-4);
    ASSERT_LE(lr, 1.0);
    ++decade[std::min(3, int(std::floor(std::log10(lr) + 4)))];
    ++ints[a[1].second];
    const double wd = std::stod(a[2].second);
    ASSERT_GE(wd, 0.0);
    ASSERT_LE(wd, 1.0);
    sum += wd;
    ++opts[a[3].second];
    EXPECT_EQ(a[4].second, "3");
  }
  // Log-uniform: each of the 4 decades holds a quarter (binomial sd ~61 of 5000; 5 sd = 300).
  for (int d : decade) EXPECT_NEAR(d, n / 4, 300);
  // Each integer 1..5 equally likely (sd ~57 of 4000), none outside.
  EXPECT_EQ(ints.size(), 5u);
  for (const auto& [v, count] : ints) {
    EXPECT_GE(std::stoi(v), 1);
    EXPECT_LE(std::stoi(v), 5);
    EXPECT_NEAR(count, n / 5, 300) << v;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);  // uniform on [0, 1]: sd of the mean 0.002
  EXPECT_EQ(opts.size(), 2u);
  EXPECT_NEAR(opts["\"adam\""], n / 2, 400);
}

// ASHA with eta = 2 and rungs of 1, 2, 4 steps, larger is better.
struct Asha {
  Searcher s;
  std::vector<TrialView> trials;
  int64_t max_trials;
  explicit Asha(int64_t max) : max_trials(max) {
    s.kind = Searcher::Kind::asha;
    s.reduction_factor = 2;
    s.rung_steps = {1, 2, 4};
    s.max_trials = max;
  }
  Decision next() { return next_decision(s, false, trials, max_trials - int64_t(trials.size())); }
  void complete(int64_t id, double metric) {  // the trial's run to its next rung ended with metric
    TrialView& t = trials[size_t(id - 1)];
    t.metrics.push_back(metric);
    t.rungs_done = int(t.metrics.size());
    t.running = false;
  }
  void start() { trials.push_back({int64_t(trials.size()) + 1, 0, {}, true, false}); }
  void promote(int64_t id) { trials[size_t(id - 1)].running = true; }
};

void expect(const Decision& d, Decision::Kind kind, int64_t trial = 0, int rung = 0) {
  EXPECT_EQ(int(d.kind), int(kind));
  if (kind == Decision::Kind::promote) {
    EXPECT_EQ(d.trial, trial);
    EXPECT_EQ(d.rung, rung);
  }
}

TEST(Asha, PromotionsAndStopsByHandComputedRungs) {
  using D = Decision::Kind;
  Asha a(4);
  expect(a.next(), D::start);
  a.start();
  a.complete(1, 0.5);  // rung 0: {1: .5}; floor(1/2) = 0 promotable
  expect(a.next(), D::start);
  a.start();
  a.complete(2, 0.7);  // rung 0: {2: .7, 1: .5}; top 1 = trial 2
  expect(a.next(), D::promote, 2, 1);
  a.promote(2);
  a.complete(2, 0.8);  // rung 1: {2: .8}: 0 promotable; rung 0's top 1 is trial 2, promoted already
  expect(a.next(), D::start);
  a.start();
  a.complete(3, 0.6);  // rung 0: {2, 3, 1}; top floor(3/2) = 1: trial 2 again: none to promote
  expect(a.next(), D::start);
  a.start();
  a.complete(4, 0.9);  // rung 0: {4: .9, 2: .7, 3: .6, 1: .5}; top 2 = {4, 2}: trial 4 goes on
  expect(a.next(), D::promote, 4, 1);
  a.promote(4);
  a.complete(4, 0.95);  // rung 1: {4: .95, 2: .8}; top 1 = trial 4
  expect(a.next(), D::promote, 4, 2);
  a.promote(4);
  expect(a.next(), D::wait);  // all 4 trials exist; trial 4 is training
  a.complete(4, 0.97);  // the top rung: nothing above it
  expect(a.next(), D::done);  // trials 1 and 3 stopped at rung 0, trial 2 at rung 1
}

TEST(Asha, TheTopThirdOfNineGoOnWithEtaThree) {
  Searcher s;
  s.kind = Searcher::Kind::asha;
  s.reduction_factor = 3;
  s.rung_steps = {1, 3, 9};
  std::vector<TrialView> trials;
  const double metric[9] = {0.3, 0.9, 0.1, 0.5, 0.8, 0.2, 0.7, 0.4, 0.6};  // best: 2 (.9), 5 (.8), 7 (.7)
  for (int i = 0; i < 9; ++i) trials.push_back({i + 1, 1, {metric[i]}, false, false});
  std::vector<int64_t> promoted;
  for (;;) {
    const Decision d = next_decision(s, false, trials, 0);
    if (d.kind != Decision::Kind::promote) break;
    EXPECT_EQ(d.rung, 1);
    promoted.push_back(d.trial);
    trials[size_t(d.trial - 1)].running = true;
  }
  EXPECT_EQ(promoted, (std::vector<int64_t>{2, 5, 7}));  // best first
  // Smaller is better: the three smallest, 3 (.1), 6 (.2), 1 (.3).
  for (TrialView& t : trials) t.running = false;
  promoted.clear();
  for (;;) {
    const Decision d = next_decision(s, true, trials, 0);
    if (d.kind != Decision::Kind::promote) break;
    promoted.push_back(d.trial);
    trials[size_t(d.trial - 1)].running = true;
  }
  EXPECT_EQ(promoted, (std::vector<int64_t>{3, 6, 1}));
}

TEST(Asha, TiesGoToTheLowerIdAndMissingMetricsRankLast) {
  Searcher s;
  s.kind = Searcher::Kind::asha;
  s.reduction_factor = 2;
  s.rung_steps = {1, 2};
  std::vector<TrialView> trials = {{1, 1, {NAN}, false, false}, {2, 1, {0.5}, false, false},
                                   {3, 1, {0.5}, false, false}, {4, 1, {NAN}, false, false}};
  const Decision d = next_decision(s, false, trials, 0);
  EXPECT_EQ(int(d.kind), int(Decision::Kind::promote));
  EXPECT_EQ(d.trial, 2);
  // A failed trial (finished) is never promoted, though it ranks first.
  trials[1].finished = true;
  EXPECT_EQ(next_decision(s, false, trials, 0).trial, 3);
  EXPECT_TRUE(better(0.1, NAN, false));
  EXPECT_FALSE(better(NAN, 0.1, true));
}

TEST(OneRungSearchers, StartEveryTrialAndPromoteNone) {
  Searcher s;
  s.kind = Searcher::Kind::random;
  s.rung_steps = {100};
  std::vector<TrialView> trials = {{1, 1, {0.9}, false, false}, {2, 1, {0.8}, false, false}};
  EXPECT_EQ(int(next_decision(s, false, trials, 3).kind), int(Decision::Kind::start));
  EXPECT_EQ(int(next_decision(s, false, trials, 0).kind), int(Decision::Kind::done));
  trials.push_back({3, 0, {}, true, false});
  EXPECT_EQ(int(next_decision(s, false, trials, 0).kind), int(Decision::Kind::wait));
}

TEST(ExperimentState, RoundTripsAndRefusesDamage) {
  ExperimentState st;
  st.name = "e";
  st.spec_json = R"({"name":"e"})";
  st.status = "interrupted";
  TrialRecord t;
  t.id = 1, t.dir = "trial-0001", t.hyperparameters = {{"lr", "0.01"}, {"optimizer", "\"sgd\""}};
  t.state = "paused", t.target_rung = 1, t.metrics = {0.5, NAN}, t.steps = 8, t.restarts = 1, t.seconds = 2.5;
  t.error = "x";
  st.trials = {t};
  auto back = state_from_json(state_to_json(st), "s.json");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->name, "e");
  EXPECT_EQ(back->status, "interrupted");
  ASSERT_EQ(back->trials.size(), 1u);
  const TrialRecord& b = back->trials[0];
  EXPECT_EQ(b.hyperparameters, t.hyperparameters);
  EXPECT_EQ(b.state, "paused");
  EXPECT_EQ(b.target_rung, 1);
  ASSERT_EQ(b.metrics.size(), 2u);
  EXPECT_EQ(b.metrics[0], 0.5);
  EXPECT_TRUE(std::isnan(b.metrics[1]));
  EXPECT_EQ(b.steps, 8);
  EXPECT_EQ(b.restarts, 1);
  EXPECT_EQ(b.seconds, 2.5);
  // Its latest rung has no metric: no best trial yet. With a second trial that has one, that one.
  EXPECT_EQ(best_trial(*back, false), -1);
  ExperimentState two = *back;
  two.trials.push_back(t);
  two.trials[1].id = 2, two.trials[1].metrics = {0.25};
  EXPECT_EQ(best_trial(two, false), 2);
  two.trials[0].metrics = {0.5};
  EXPECT_EQ(best_trial(two, false), 1);
  EXPECT_EQ(best_trial(two, true), 2);
  // A directory that would lead out of the experiment, a bad state, a truncated file.
  std::string text = state_to_json(st);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"trial-0001\"", "\"../x\""}, {"\"paused\"", "\"sleeping\""}, {"\"id\": 1", "\"id\": 2"},
           {"\"id\": 1", "\"id\": 1e300"}, {"\"steps\": 8", "\"steps\": 8.5"}, {"\"target_rung\": 1", "\"target_rung\": 99"}}) {
    std::string bad = text;
    ASSERT_NE(bad.find(from), std::string::npos) << from;
    bad.replace(bad.find(from), from.size(), to);
    auto r = state_from_json(bad, "s.json");
    EXPECT_EQ(r.status().code(), StatusCode::data_loss) << to;
  }
  EXPECT_EQ(state_from_json(text.substr(0, text.size() / 2), "s.json").status().code(), StatusCode::data_loss);
  // A "format" that is not a string (the fuzzer's find: nlohmann's value() threw on it).
  for (const char* format : {"[{\"id\": 1}]", "7", "null", "{}"}) {
    std::string bad = text;
    const std::string from = "\"mixprec-experiment\"";
    ASSERT_NE(bad.find(from), std::string::npos);
    bad.replace(bad.find(from), from.size(), format);
    EXPECT_EQ(state_from_json(bad, "s.json").status().code(), StatusCode::data_loss) << format;
  }
}

}  // namespace
}  // namespace mixprec::experiment
