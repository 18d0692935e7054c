"""The benchmark (`bptt bench`), the peers it times the generated modules against, and the README's benchmark
scripts (`python3 -m bptt.app.bench.readme_table`, ...)."""
