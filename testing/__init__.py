"""Harnesses the tests and the benchmarks share (tests/ holds the tests' own helpers).

Production code (crow, models, indexes, deployments, jobs) never imports this package, and
the distribution does not ship it (tests/test_layers.py checks both).
"""
