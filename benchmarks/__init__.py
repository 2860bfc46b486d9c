"""Benchmarks of the exact local cloaking engine against its peers (see docs/performance.md)."""
