// backend/onednn/weights_cache.h: PyTorch-layout weights reordered into the layout a
// primitive prefers (format_tag::any -> e.g. blocked OIhw16i16o), kept across calls.
//
// Key: the source buffer's address, its shape and dtype (the user md), and the target md.
// The entry remembers the buffer's version (Storage::version, bumped by every in-place
// write through any view) and a weak reference to its Storage; a call reorders again only
// when the version changed (an optimizer step bumps it) or the storage is not the one
// cached (the old tensor was freed and a new one reuses the address: the weak reference has
// expired). Writing into weights without bumping the version is therefore invisible to this
// cache: the rule for every in-place writer is "bump version" (optimizers, copy_, fill_). No data fingerprint is taken, by design: it
// would cost a pass over the weights each call.
// Buffers of entries whose storage died are recycled for new entries of the same size, so
// an autocast step that casts fresh bf16 weights every iteration does not allocate.
#pragma once
#include "backend/onednn/memory_desc.h"

namespace mixprec::backend::onednn {

// A tensor whose data() holds w in layout `target`: w itself when its own strided desc
// already equals target, otherwise the cached reordered buffer (u8, opaque). Keep the
// returned tensor alive while the primitive that reads it runs.
Tensor weights_in_layout(const Tensor& w, const dnnl_md& target);
// The same, with w's memory described by `user` (a grouped convolution's 5-D view of its
// 4-D weights, conv_util.h's weights_md).
Tensor weights_in_layout(const Tensor& w, const dnnl_md& user, const dnnl_md& target);

}  // namespace mixprec::backend::onednn
