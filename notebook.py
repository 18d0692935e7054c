"""The notebook API, `from bptt.notebook import analyze, derive, exercises`: it lives in bptt.app.notebook."""

from bptt.app.notebook import analyze, derive, exercises

__all__ = ["analyze", "derive", "exercises"]
