"""One capability per construct; props are keyword-only."""
