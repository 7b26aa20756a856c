// Keeps the test helper library non-empty while tests/common grows.
