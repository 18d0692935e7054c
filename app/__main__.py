from bptt.app.start import run

run()
