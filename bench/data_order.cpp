// data_order: the sample order mixprec's DataLoader uses for each epoch (shuffled_order, the
// same on every standard library), written for a peer that must see the same batches:
// bench/tta_torch.py trains PyTorch on exactly mixprec's data order.
//
//   data_order N SEED EPOCHS OUT   writes EPOCHS x N int64 (little-endian), epoch after epoch
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "mixprec/data/data.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: data_order N SEED EPOCHS OUT (EPOCHS x N int64 sample indices)\n");
    return 2;
  }
  const long long n = std::atoll(argv[1]), epochs = std::atoll(argv[3]);
  const unsigned long long seed = std::strtoull(argv[2], nullptr, 10);
  if (n < 1 || epochs < 1) {
    std::fprintf(stderr, "data_order: N and EPOCHS must be >= 1\n");
    return 2;
  }
  std::FILE* out = std::fopen(argv[4], "wb");
  if (out == nullptr) {
    std::fprintf(stderr, "data_order: cannot write %s: %s\n", argv[4], std::strerror(errno));
    return 1;
  }
  for (long long e = 0; e < epochs; ++e) {
    const std::vector<int64_t> order = mixprec::shuffled_order(n, seed, e);
    if (std::fwrite(order.data(), sizeof(int64_t), order.size(), out) != order.size()) {
      std::fprintf(stderr, "data_order: short write to %s\n", argv[4]);
      return 1;
    }
  }
  return std::fclose(out) == 0 ? 0 : 1;
}
