"""Tools that are not part of the library and not benchmarks (`python -m tools.NAME`, from the repository root)."""
