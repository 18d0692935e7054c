"""ModelError, apart from model.py so that the nodes a model is written with (norms.py, reductions.py) raise it too."""


class ModelError(ValueError):
    """A model description that cannot be derived; the message says why."""
