"""The benchmark and the peers it times the generated modules against."""
