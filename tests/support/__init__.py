"""What the tests share, imported by its package path (`from bptt.tests.support.oracle import compare`):
problems and brute force (problems, brute_force), the oracle (oracle, oracle_eval), cells (cells, cell_plans,
cell_shapes drawn at random; user_cells, paper_cells, oracle_found_cells, crash_cells, refusal_cells, named_cell
written out), running the CLI (cli, cli_fork, fork_server), processes forked from the test's (forked), documents
(printed, markdown_read), the generated modules (modules, checkpoints, flow, jax_eager), XLA's flags and JAX's one
MLIR context (xla)."""
