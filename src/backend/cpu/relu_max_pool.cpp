// backend/cpu/relu_max_pool.cpp: fused ReLU + max pooling kernels (see relu_max_pool.h).
// Letters: N batch, C channels, H/W input, OH/OW output (= H/k, W/k, floor), k window.
//
// Paths:
// - NHWC on AVX-512 (the hot path: the convolutions return channels-last): 16 channels
//   per vector, compared in f32 (bf16/f16 widened exactly), running maximum starting at
//   +0 with a strict ">" so the first maximum wins and windows <= 0 keep "no argmax"; the
//   first NaN of a window beats every number, as relu + max_pool2d propagate NaN in PyTorch.
//   Backward writes every diff_src element once: diff_dst where the argmax names that
//   window position, else +0 (a pure select on the raw bits, no arithmetic).
// - NHWC on AVX2 (no AVX-512: AMD Zen2/Zen3, Intel Haswell..Comet Lake): the same rule, 8
//   channels per vector (16 in the backward's 16-bit selects), channel tails in scalar code;
//   codes are written as bytes and packed per row pair like the scalar path.
// - Everything else (NCHW, neither ISA): the same rule in scalar loops over strides.
// Argmax: the kernels compute one byte code per output (position, or 255 = none). Packed
// (k <= 3): NHWC on AVX-512 with an even C packs pairs of codes in registers (a vector of
// 16 channels starts at an even element); every other case writes the codes of a pair of
// dst rows to a thread-local buffer and packs that (255 & 0xF is the packed "none"). The
// backward unpacks one dst row at a time. A "row" is a run of dst elements adjacent in
// memory: (n, c, oh) x ow for NCHW, (n, oh) x (ow, c) for NHWC on AVX-512, (n, oh, ow) x c
// for NHWC in scalar code.
// Threads: OpenMP over dst rows (in-register packing: every row is whole bytes) or pairs
// of dst rows (a pair starts at an even element, so no packed byte is shared between
// threads) in the forward, N*H input rows (N*C*H for the scalar path) in the backward;
// skipped below ~32K elements, where the fork costs more than the work (limits.md §1.5).
// Files: this one holds the entry points and the scalar path (the rules' reference);
// relu_max_pool_avx512.cpp and relu_max_pool_avx2.cpp the NHWC vector paths;
// relu_max_pool_rows.* what they share (argmax packing, row walks, threading).
// tests/unit/ops/fused_relu_pool_test.cpp checks every path against relu + max_pool2d.
#include "backend/cpu/relu_max_pool.h"

#include <cmath>
#include <cstring>
#include <string>

#include "backend/cpu/relu_max_pool_rows.h"

namespace mixprec::backend::cpu {
namespace {

using namespace relu_pool;

[[noreturn]] void bad(const std::string& m) { throw Error(Status::invalid_argument(m)); }

// ---- scalar path: any strides ------------------------------------------------------

// Walks dst in its memory order (nhwc: rows (n, oh, ow) of C; else rows (n, c, oh) of OW),
// so the code of dst element o goes to argmax element o.
void forward_scalar(const Tensor& x, Tensor& dst, uint8_t* arg, bool packed, int64_t k, bool nhwc) {
  const int64_t N = x.size(0), C = x.size(1), OH = dst.size(2), OW = dst.size(3);
  const Shape& xs = x.strides();
  const DType dt = x.dtype();
  const size_t es = dtype_size(dt);
  const void* xp = x.data();
  void* dp = dst.data();
  const int64_t rows = nhwc ? N * OH * OW : N * C * OH, len = nhwc ? C : OW;
  for_each_dst_row(rows, len, packed, arg, dst.numel() * k * k > kParallelMin, [&](int64_t r, uint8_t* codes) {
    for (int64_t j = 0; j < len; ++j) {
      int64_t n, c, oh, ow;
      if (nhwc) {
        n = r / (OH * OW), oh = (r / OW) % OH, ow = r % OW, c = j;
      } else {
        n = r / (C * OH), c = (r / OH) % C, oh = r % OH, ow = j;
      }
      float m = 0.0f;
      int64_t best = -1;
      uint8_t pos = kNoArgmax;
      for (int64_t i = 0; i < k; ++i)
        for (int64_t jj = 0; jj < k; ++jj) {
          const int64_t off = n * xs[0] + c * xs[1] + (oh * k + i) * xs[2] + (ow * k + jj) * xs[3];
          const float v = load_scalar(xp, dt, off);
          // Strict: the first maximum wins; the first NaN beats every number.
          if (v > m || (std::isnan(v) && !std::isnan(m))) {
            m = v;
            best = off;
            pos = static_cast<uint8_t>(i * k + jj);
          }
        }
      const int64_t o = r * len + j;  // dst is freshly allocated, dense in this order
      if (best >= 0) {
        copy_raw(xp, best, dp, o, es);
      } else {
        std::memset(static_cast<char*>(dp) + o * es, 0, es);  // +0 in every dtype
      }
      codes[j] = pos;
    }
  });
}

// dd is dense in the forward's memory order, so its offset of an output is also that
// output's argmax element.
void backward_scalar(const Tensor& dd, const uint8_t* ap, bool packed, Tensor& diff_src, int64_t k) {
  const int64_t N = diff_src.size(0), C = diff_src.size(1), H = diff_src.size(2),
                W = diff_src.size(3), OH = dd.size(2), OW = dd.size(3);
  const Shape &ss = diff_src.strides(), &gs = dd.strides();
  const size_t es = dtype_size(diff_src.dtype());
  const void* gp = dd.data();
  void* sp = diff_src.data();
  const int64_t rows = N * C * H;
#pragma omp parallel for schedule(static) if (diff_src.numel() > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = r / (C * H), c = (r / H) % C, h = r % H;
    for (int64_t w = 0; w < W; ++w) {
      const int64_t o = n * ss[0] + c * ss[1] + h * ss[2] + w * ss[3];
      const int64_t oh = h / k, ow = w / k;
      if (oh < OH && ow < OW) {
        const int64_t a = n * gs[0] + c * gs[1] + oh * gs[2] + ow * gs[3];
        if ((packed ? nibble(ap, a) : ap[a]) == (h % k) * k + (w % k)) {
          copy_raw(gp, a, sp, o, es);
          continue;
        }
      }
      std::memset(static_cast<char*>(sp) + o * es, 0, es);
    }
  }
}

void check_kernel(const char* op, int64_t kernel) {
  if (kernel < 1 || kernel > 15)
    bad(std::string(op) + ": kernel " + std::to_string(kernel) +
        " must be in 1..15 (the argmax is at most one byte and 255 means 'no maximum > 0')");
}

}  // namespace

ReluMaxPoolResult relu_max_pool2d_forward(const Tensor& src, int64_t kernel) {
  const char* op = "relu_max_pool2d_forward";
  check_kernel(op, kernel);
  if (src.dim() != 4) bad(std::string(op) + ": src " + src.str() + " must be 4-D [N, C, H, W]");
  const DType dt = src.dtype();
  if (dt != DType::f32 && dt != DType::bf16 && dt != DType::f16)
    bad(std::string(op) + ": src dtype " + dtype_name(dt) + " unsupported (expected f32, bf16 or f16)");
  if (src.size(2) < kernel || src.size(3) < kernel)
    bad(std::string(op) + ": kernel " + std::to_string(kernel) + " is larger than src " +
        shape_str(src.shape()));
  const Tensor x = src.is_dense() ? src : src.contiguous();
  const MemoryFormat f = x.suggest_memory_format();
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const Shape out_shape{N, C, H / kernel, W / kernel};
  const bool packed = argmax_is_packed(kernel);
  const int64_t numel = shape_numel(out_shape);
  ReluMaxPoolResult r{Tensor::empty(out_shape, dt, f),
                      packed ? Tensor::empty({(numel + 1) / 2}, DType::u8)
                             : Tensor::empty(out_shape, DType::u8, f),
                      f};
  if (numel == 0) return r;
  uint8_t* arg = r.argmax.data_ptr<uint8_t>();
  const bool nhwc = f == MemoryFormat::channels_last && !x.is_contiguous();
  if (nhwc && has_avx512()) {
    forward_nhwc_avx512(dt, x.data(), r.dst.data(), arg, packed, N, C, H, W, kernel);
  } else if (nhwc && has_avx2()) {
    forward_nhwc_avx2(dt, x.data(), r.dst.data(), arg, packed, N, C, H, W, kernel);
  } else {
    forward_scalar(x, r.dst, arg, packed, kernel, f == MemoryFormat::channels_last);
  }
  return r;
}

Tensor relu_max_pool2d_backward(const Tensor& diff_dst, const Tensor& argmax,
                                const Shape& src_shape, int64_t kernel, MemoryFormat format) {
  const char* op = "relu_max_pool2d_backward";
  check_kernel(op, kernel);
  if (src_shape.size() != 4)
    bad(std::string(op) + ": src shape " + shape_str(src_shape) + " must be 4-D [N, C, H, W]");
  const Shape out_shape{src_shape[0], src_shape[1], src_shape[2] / kernel, src_shape[3] / kernel};
  const bool packed = argmax_is_packed(kernel);
  const Shape arg_shape = packed ? Shape{(shape_numel(out_shape) + 1) / 2} : out_shape;
  const bool arg_ok = argmax.defined() && argmax.dtype() == DType::u8 && argmax.shape() == arg_shape &&
                      (packed ? argmax.is_contiguous()
                              : format == MemoryFormat::channels_last ? argmax.is_channels_last()
                                                                      : argmax.is_contiguous());
  if (!arg_ok)
    bad(std::string(op) + ": argmax " + (argmax.defined() ? argmax.str() : std::string("undefined")) +
        " must be the dense u8 " + shape_str(arg_shape) + " tensor the forward returned (kernel " +
        std::to_string(kernel) + (packed ? ", 4-bit packed)" : ", one byte per output)"));
  if (diff_dst.shape() != out_shape)
    bad(std::string(op) + ": diff_dst " + diff_dst.str() + " must have shape " + shape_str(out_shape));
  const DType dt = diff_dst.dtype();
  if (dt != DType::f32 && dt != DType::bf16 && dt != DType::f16)
    bad(std::string(op) + ": diff_dst dtype " + dtype_name(dt) +
        " unsupported (expected f32, bf16 or f16)");
  // diff_dst must walk the same element order as argmax (both are indexed with dd's offsets).
  const bool same_order = format == MemoryFormat::channels_last ? diff_dst.is_channels_last()
                                                                : diff_dst.is_contiguous();
  const Tensor dd = same_order ? diff_dst : diff_dst.detach().to_memory_format(format);
  Tensor diff_src = Tensor::empty(src_shape, dt, format);
  if (diff_src.numel() == 0) return diff_src;
  const uint8_t* arg = argmax.data_ptr<uint8_t>();
  if (format == MemoryFormat::channels_last && (has_avx512() || has_avx2())) {
    const int64_t N = src_shape[0], C = src_shape[1], H = src_shape[2], W = src_shape[3];
    const size_t es = dtype_size(dt);
    if (has_avx512())
      backward_nhwc_avx512(es, dd.data(), arg, packed, diff_src.data(), N, C, H, W, kernel);
    else
      backward_nhwc_avx2(es, dd.data(), arg, packed, diff_src.data(), N, C, H, W, kernel);
  } else {
    backward_scalar(dd, arg, packed, diff_src, kernel);
  }
  return diff_src;
}

}  // namespace mixprec::backend::cpu
