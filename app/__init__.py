"""The application: the CLI, output files, checks, analysis, plots, the notebook API."""
