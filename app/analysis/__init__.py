"""Analysis: `bptt analyze`'s gradient-flow measurements, their tables and plots."""
