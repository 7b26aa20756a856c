// backend/cpu/batch_norm_sums.h: batch_norm's per-channel sums in a fixed order. A channel's
// values, numbered p = 0 .. m-1 in (n, h, w) order, go to 32 partial sums by p mod 32, each
// added in increasing p; combine() adds the 32 by one fixed tree. The order does not depend
// on the layout (contiguous or channels-last), the thread count or the CPU: the AVX-512
// kernel adds the lanes as four vectors of doubles, rounding products and sums as the scalar
// code does (no FMA), so every path gives the same bits.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "backend/cpu/norm.h"

namespace mixprec::backend::cpu::batch_norm_sums {

constexpr int64_t kLanes = 32;
using Lanes = std::array<double, kLanes>;

double combine(const Lanes& lanes);

// The three sums batch_norm needs, over values widened to f32 (exact for f32, bf16, f16):
//   values:    sums += x
//   deviation: sums += (x - mean) * (x - mean)
//   backward:  sums += dy; sums2 += (dy * (x - mean)) * invstd
enum class SumKind { values, deviation, backward };

// Per channel of x (and dy for backward; either layout, dense; not f64), the lane sums of
// kind K into sums (and sums2), resized to x's channels. mean / invstd: per channel, as K
// needs them (empty otherwise).
template <SumKind K>
void fast_lane_sums(const ChannelLayout& l, const Tensor& x, const Tensor* dy, int64_t numel,
                    const std::vector<double>& mean, const std::vector<double>& invstd, std::vector<Lanes>& sums,
                    std::vector<Lanes>& sums2);

}  // namespace mixprec::backend::cpu::batch_norm_sums
