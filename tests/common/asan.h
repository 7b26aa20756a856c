// tests/common/asan.h: MIXPREC_TEST_ASAN is 1 when the test is built with AddressSanitizer
// (scripts/sanitize), for the tests that behave differently there. gcc defines
// __SANITIZE_ADDRESS__, clang answers __has_feature.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define MIXPREC_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MIXPREC_TEST_ASAN 1
#endif
#endif
