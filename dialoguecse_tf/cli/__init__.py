"""Command-line entry points installed with the package (absl `main`s)."""
