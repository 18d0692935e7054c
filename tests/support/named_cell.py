"""An Elman cell whose names a test chooses, as a user's model file's text (tests/codegen/test_names.py writes
it for the CLI) and built in process (make)."""

import textwrap
import types

CELL = textwrap.dedent(
    '''
    """An Elman cell whose names a test chooses."""

    import dataclasses

    from bptt.derive.model import Model, matrix, sequence, sizes, vector
    from bptt.derive.nodes import SquaredError, t, tanh


    def make(x="x", a="a", h="h", o="o", y="y", U="U", W="W", V="V", b="b", d="d", n="h", q="q", twice=None, **more):
        if more.get("layers") == 2:
            return two_layers(x, h, o, y, d, n, q, more["k"])
        d, n, q = sizes([d, n, q])
        U, W, V, b = matrix(U, n, d), matrix(W, n, n), matrix(V, q, n), vector(b, n)
        x, a, h = sequence(x, d, "input"), sequence(a, n, "intermediate"), sequence(h, n, "state")
        o, y = sequence(o, q, "output"), sequence(y, q, "target")
        model = Model(
            name="cell",
            title="An Elman cell",
            source="tests/codegen/test_names.py",
            sizes=(d, n, q),
            params=(U, W, V, b),
            inputs=(x,),
            steps=((a, U * x() + W * h(t - 1) + b), (h, tanh(a()))),
            outputs=((o, V * h()),),
            loss=SquaredError(o(), y()),
        )
        if more.get("chain"):  # links of names (size s, parameter P, intermediate e): e = P e_before (h_t first)
            rows = tuple(sizes([size for size, _, _ in more["chain"]]))
            chain = [
                (s, matrix(p, s, before), sequence(e, s, "intermediate"))
                for (_, p, e), s, before in zip(more["chain"], rows, (n,) + rows)
            ]
            steps, before = model.steps, h
            for size, p, e in chain:
                steps, before = steps + ((e, p * before()),), e
            last = matrix(more["last"], q, chain[-1][0])
            model = dataclasses.replace(
                model,
                sizes=model.sizes + tuple(c[0] for c in chain),
                params=model.params + tuple(c[1] for c in chain) + (last,),
                steps=steps,
                outputs=((o, V * h() + last * before()),),
            )
        if twice == "parameter":
            return dataclasses.replace(model, params=model.params + (W,))
        if twice == "size":
            return dataclasses.replace(model, sizes=model.sizes + (n,))
        if twice == "step":
            return dataclasses.replace(model, steps=model.steps + ((h, tanh(a())),))
        return model


    def two_layers(x, h, o, y, d, n, q, k):
        """Two Elman layers, the second of size k."""
        d, n, q, k = sizes([d, n, q, k])
        U1, W1, b1 = matrix("U1", n, d), matrix("W1", n, n), vector("b1", n)
        U2, W2, b2, V = matrix("U2", k, n), matrix("W2", k, k), vector("b2", k), matrix("V", q, k)
        x, h1, h2 = sequence(x, d, "input"), sequence(h + "1", n, "state"), sequence(h + "2", k, "state")
        o, y = sequence(o, q, "output"), sequence(y, q, "target")
        return Model(
            name="cell",
            title="Two Elman layers",
            source="tests/codegen/test_names.py",
            sizes=(d, n, q, k),
            params=(U1, W1, b1, U2, W2, b2, V),
            inputs=(x,),
            steps=((h1, tanh(U1 * x() + W1 * h1(t - 1) + b1)), (h2, tanh(U2 * h1() + W2 * h2(t - 1) + b2))),
            outputs=((o, V * h2()),),
            loss=SquaredError(o(), y()),
        )
    '''
)


def make(**choices):
    """The cell's Model with these names (CELL's make)."""
    module = types.ModuleType("named_cell")
    exec(CELL, module.__dict__)
    return module.make(**choices)
