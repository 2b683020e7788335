"""Top-level test configuration. Shared helpers live in tests/support/."""
