"""The printing every backend shares: expressions, statements, bindings, layout, helpers."""
