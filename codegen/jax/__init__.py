"""The JAX backend: its printer, scans, renderer, template and helpers."""
