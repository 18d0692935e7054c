"""The NumPy backend: its renderer, module template and helpers."""
