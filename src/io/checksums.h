// io/checksums.h: the checksums mixprec writes into every safetensors file it saves and
// verifies on every load (issue 12: 161 of 520 single-byte flips in a checkpoint were loaded
// silently, in rng_state and the config text, which no parser can judge).
//
// Format: one `__metadata__` entry, key "mixprec.checksums", whose value is a JSON object
//   {"algorithm":"xxh3-64","header":"<16 hex>","tensors":{"<name>":"<16 hex>",...}}
// - a tensor's digest is XXH3-64 over its name, a NUL, its dtype name ("F32"), a NUL, its
//   shape as 8-byte little-endian integers, then its data bytes as stored;
// - the header digest is XXH3-64 over every other `__metadata__` entry in key order, each as
//   key NUL value NUL.
// The file stays a plain safetensors file (PyTorch's safetensors library reads it; the entry is
// just a string). A file without the entry (written by PyTorch, or by mixprec before
// checksums) loads as "unverified". xxHash is Debian's libxxhash, used header-only.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/io/safetensors.h"
#include "mixprec/core/status.h"
#include "mixprec/core/tensor.h"

namespace mixprec::io {

inline constexpr const char* kChecksumKey = "mixprec.checksums";

// The "mixprec.checksums" value for these tensors (contiguous, as they will be stored) and
// the metadata they are saved with (a checksum entry already in it is ignored).
std::string checksum_entry(const std::vector<std::pair<std::string, Tensor>>& contiguous_tensors,
                           const std::map<std::string, std::string>& metadata);

// XXH3-64 of bytes, continuing from `seed` (chain calls to hash several buffers): the one
// hash function of mixprec (data-parallel ranks compare weights and data with it).
uint64_t hash_bytes(const void* data, size_t size, uint64_t seed = 0);

// Checks file's tensors and metadata against its checksum entry. ok when they match, and when
// there is no entry (then file.checksums is "absent"); data_loss naming `path`, the tensor (or
// the header metadata) and both digests otherwise, or when the entry itself is malformed.
Status verify_checksums(SafetensorsFile& file, const std::string& path);

}  // namespace mixprec::io
