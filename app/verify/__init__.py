"""Verification: `bptt check`'s finite differences (Ridders), wide parameter sets, random problems, other backends."""
