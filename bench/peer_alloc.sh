# peer_alloc.sh (sourced by run_benchmarks.sh and gpt_context.sh): the glibc malloc settings
# of the peer's "tuned" allocator configurations, defined once.
# tuned: no mmap threshold and no trimming, so glibc keeps the activation buffers PyTorch
# frees after a step instead of handing them back to the OS and page-faulting them in again.
TUNABLES="glibc.malloc.mmap_threshold=2147483647:glibc.malloc.trim_threshold=2147483647"
# tuned-thp: the same, and malloc asks for transparent huge pages (madvise) on what it maps:
# with the kernel's common THP mode "madvise" nothing gets huge pages otherwise. It made
# PyTorch's seed-CNN step 5-9% faster on AMD Zen5 (mixprec's allocator does this itself).
# jemalloc with MALLOC_CONF=thp:always was tried as well: no faster than this.
THP_TUNABLES="$TUNABLES:glibc.malloc.hugetlb=1"
