"""The speed benchmarks, a package run from the repository's root as `python -m benchmarks.NAME`."""
