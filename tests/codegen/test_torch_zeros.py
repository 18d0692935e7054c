"""torch's window pass makes its zero adjoints of one shape as one tensor, its rows unpacked: as many tensors
as keep each unpacking within the module's columns, however many adjoints a cell has."""

from bptt.codegen.printing.breaking import STEP
from bptt.codegen.printing.columns import WIDTH
from bptt.codegen.torch.backward import zeros_of


def test_many_adjoints_of_one_shape_are_unpacked_within_the_columns_in_order():
    names = [f"d_state_with_a_long_name_{k}" for k in range(12)]
    lines = zeros_of(names, "T + 1, B, n_h")
    assert len(lines) > 1
    assert all(len(STEP + line.split("torch.zeros(")[0]) <= WIDTH for line in lines)
    assert [name.strip() for line in lines for name in line.split(" = ")[0].split(",")] == names
    assert all(f"({len(line.split(' = ')[0].split(','))}, T + 1, B, n_h)" in line for line in lines)


def test_one_adjoint_is_one_tensor():
    assert zeros_of(["d_h"], "T + 1, B, n_h") == ["d_h = torch.zeros((T + 1, B, n_h), dtype=dtype, device=device)"]
