"""Exercises on BPTT with checked solutions: a small instance of a model, its problem sheet and its solution
sheet, every answer an exact rational computed from the derivation's own formulas (`bptt exercises`)."""
