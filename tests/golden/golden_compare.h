// golden_compare.h: what the PyTorch golden tests share: reading the committed golden file
// (with how to regenerate it), looking tensors up by name, copying PyTorch's parameters into
// a module, and comparisons that name the worst element and print their margin.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/compare_guard.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/nn/nn.h"
#include "mixprec/io/safetensors.h"

namespace mixprec::golden_check {

inline std::string index_str(const Shape& shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  std::ostringstream s;
  s << "[";
  for (size_t d = 0; d < idx.size(); ++d) s << (d ? ", " : "") << idx[d];
  s << "]";
  return s.str();
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

using test::AllZero;

// |actual - expected| <= allowed everywhere; on failure names the worst element. Fails on an
// undefined or empty tensor, a shape mismatch, a NaN on either side, and on both all zero
// unless `zeros` is AllZero::allowed (tests/common/compare_guard.h).
inline ::testing::AssertionResult all_close(const std::string& what, const Tensor& actual,
                                            const Tensor& expected, double allowed, const std::string& rule,
                                            AllZero zeros = AllZero::reject) {
  if (!actual.defined()) return ::testing::AssertionFailure() << what << ": tensor is undefined";
  if (!expected.defined()) return ::testing::AssertionFailure() << what << ": expected tensor is undefined";
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << what << ": shape " << shape_str(actual.shape()) << ", expected "
                                         << shape_str(expected.shape());
  const std::vector<double> a = actual.to_vector_f64(), e = expected.to_vector_f64();
  if (auto ok = test::not_vacuous(what, a, e, zeros); !ok) return ok;
  double worst = -1;
  int64_t worst_i = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(a[i] - e[i]);
    if (!(d <= worst) || std::isnan(d)) {  // NaN counts as the worst
      worst = std::isnan(d) ? INFINITY : d;
      worst_i = int64_t(i);
    }
  }
  // The margin is worth seeing on success too (tolerances are judged from these lines).
  std::printf("  %-38s max |diff| %.3g at %s, allowed %.3g\n", what.c_str(), std::max(worst, 0.0),
              index_str(actual.shape(), worst_i).c_str(), allowed);
  if (worst <= allowed) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": max |diff| " << worst << " at "
                                       << index_str(actual.shape(), worst_i) << " (actual " << a[size_t(worst_i)]
                                       << ", expected " << e[size_t(worst_i)] << "), allowed " << allowed << " = "
                                       << rule << "; max |expected| " << max_abs(e);
}

// tol relative to the tensor's largest magnitude: summation-order error of a dot product
// scales with the size of its terms, not of its (possibly cancelling) result.
inline ::testing::AssertionResult close_to_scale(const std::string& what, const Tensor& actual,
                                                 const Tensor& expected, double tol,
                                                 AllZero zeros = AllZero::reject) {
  if (!expected.defined()) return ::testing::AssertionFailure() << what << ": expected tensor is undefined";
  std::ostringstream rule;
  rule << tol << " * max|expected|";
  return all_close(what, actual, expected, tol * max_abs(expected.to_vector_f64()), rule.str(), zeros);
}

// The committed golden file of a test suite, loaded once.
class GoldenFile {
 public:
  // generator: the script that writes the file, named in the failure message.
  GoldenFile(std::string path, std::string generator) : path_(std::move(path)), generator_(std::move(generator)) {}

  ::testing::AssertionResult load() {
    auto loaded = load_safetensors(path_);
    if (!loaded.is_ok())
      return ::testing::AssertionFailure() << loaded.status().message() << " (regenerate with /usr/bin/python3 "
                                           << generator_ << ")";
    auto file = std::make_unique<SafetensorsFile>(std::move(loaded).value());
    // A file that parses but holds nothing (a generator that crashed half-way, a truncated
    // commit) must not let every lookup-free check pass.
    if (file->tensors.empty())
      return ::testing::AssertionFailure() << path_ << ": golden file holds no tensors (regenerate with "
                                           << "/usr/bin/python3 " << generator_ << ")";
    file_ = std::move(file);
    return ::testing::AssertionSuccess();
  }
  void reset() { file_.reset(); }
  bool loaded() const { return file_ != nullptr; }
  const std::map<std::string, std::string>& metadata() const { return file_->metadata; }

  // The tensor `name`; a missing one fails the test and returns a placeholder.
  const Tensor& operator()(const std::string& name) const {
    const Tensor* t = file_ ? file_->find(name) : nullptr;
    if (t == nullptr || t->numel() == 0) {
      ADD_FAILURE() << path_ << ": " << (t ? "empty" : "no") << " tensor '" << name << "'";
      // Undefined, so that a comparison against it fails too instead of matching zeros.
      static const Tensor kMissing;
      return kMissing;
    }
    return *t;
  }

  // Copies PyTorch's parameters into the module by name; the module's names must be
  // `names`, in PyTorch's named_parameters() order, with the same shapes.
  ::testing::AssertionResult copy_parameters_into(nn::Module& module, const std::vector<std::string>& names) const {
    const auto params = module.named_parameters();
    if (params.size() != names.size())
      return ::testing::AssertionFailure() << params.size() << " parameters, PyTorch has " << names.size();
    NoGradGuard ng;
    for (size_t i = 0; i < params.size(); ++i) {
      const auto& [name, p] = params[i];
      if (name != names[i])
        return ::testing::AssertionFailure() << "parameter " << i << " is '" << name << "', PyTorch's is '"
                                             << names[i] << "'";
      const Tensor& g = (*this)(name);
      if (p.shape() != g.shape())
        return ::testing::AssertionFailure() << name << ": shape " << shape_str(p.shape()) << ", golden "
                                             << shape_str(g.shape());
      Tensor dst = p;
      dst.copy_(g);
    }
    return ::testing::AssertionSuccess();
  }

 private:
  std::string path_, generator_;
  std::unique_ptr<SafetensorsFile> file_;
};

}  // namespace mixprec::golden_check
