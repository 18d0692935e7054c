"""The application: the CLI, output files and the notebook API; verify/, analysis/ and bench/ hold the work."""
