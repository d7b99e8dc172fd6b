"""Speed and quality benchmarks (DESIGN.md §7); run ``python -m benchmarks.speed``."""
