"""Benchmarks: ``make bench`` (``python -m bench``). See ``bench/RESULTS.md``."""
