"""The PyTorch backend: its printer, backward and forward-mode printers, renderer, template, helpers."""
