"""Benchmarks that print numbers (``ariane bench ...``)."""
