from .start import run

run()
