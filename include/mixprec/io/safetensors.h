// safetensors.h: reading and writing the safetensors format (Hugging Face), the tensor
// container that checkpoints and golden files use. Layout: u64 little-endian header length N,
// N bytes of JSON {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
// "__metadata__": {string: string}}, then the data buffer the offsets index into.
//
// Dtype names: F32, F16, BF16, F64, I64, I32, U8 (the subset mixprec tensors can hold).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/core/status.h"
#include "mixprec/core/tensor.h"

namespace mixprec {

// Headers above this are refused before allocating (the Python library's MAX_HEADER_SIZE).
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

struct SafetensorsFile {
  // Contiguous tensors in file order (ascending data_offsets). For files we write this is
  // ascending name order.
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__"; empty when absent
  // The file's checksums (docs/checkpoints.md): "verified" (every tensor and the metadata
  // match), "absent" (a file not written by this mixprec, e.g. by PyTorch: loaded unverified)
  // or "not checked" (set_verify_checksums(false)). A mismatch is a load error, never a state.
  std::string checksums = "not checked";

  // nullptr when no tensor has that name.
  const Tensor* find(const std::string& name) const;
};

// Every save writes XXH3-64 checksums of each tensor and of the metadata into __metadata__
// ("mixprec.checksums"); every load verifies them when present and fails with data_loss naming
// the file and the tensor on a mismatch. set_verify_checksums(false) skips the verification
// for the rest of the process (the CLI's --no-verify-checksums: to salvage a damaged file).
void set_verify_checksums(bool verify);
bool verify_checksums_enabled();

// "F32" for DType::f32, ...
const char* safetensors_dtype_name(DType dtype);

// Writes tensors (any layout; stored contiguous, little-endian) sorted by name, with the
// header padded by spaces to a multiple of 8 bytes so that the data buffer is aligned.
// Atomic: the bytes go to "<path>.tmp.<pid>", which is fsynced and renamed over path, and the
// directory is fsynced; on any failure path is untouched and the temp file removed.
// Errors: invalid_argument (undefined tensor, duplicate or reserved name "__metadata__"),
// io_error naming the path and the OS error.
Status save_safetensors(const std::string& path,
                        const std::vector<std::pair<std::string, Tensor>>& tensors,
                        const std::map<std::string, std::string>& metadata = {});

// The exact bytes save_safetensors writes (tests, fuzz seeds, in-memory transfer).
StatusOr<std::vector<uint8_t>> serialize_safetensors(
    const std::vector<std::pair<std::string, Tensor>>& tensors,
    const std::map<std::string, std::string>& metadata = {});

// Reads and validates a whole file: data_loss (naming the file, the tensor and the field,
// with expected and actual values) for anything malformed, truncated or with trailing bytes;
// not_found when the file does not exist; io_error when the OS refuses. Allocates no more
// than the file's size, whatever the header claims.
StatusOr<SafetensorsFile> load_safetensors(const std::string& path);

// The same validation on bytes in memory; `name` stands for the file in messages.
StatusOr<SafetensorsFile> parse_safetensors(const uint8_t* data, size_t size,
                                            const std::string& name);

}  // namespace mixprec
