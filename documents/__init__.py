"""The documents: a derivation's sections, equations, LaTeX, line breaking, widths, templates."""
