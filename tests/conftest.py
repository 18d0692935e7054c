"""Fixtures shared by the tests, and the order in which pytest-xdist hands them out."""

import pytest
from problems import make_problem


@pytest.fixture(scope="session")
def concrete_problem():
    """make_problem(name, steps, seed), e.g. concrete_problem("elman", 3, seed=1)."""
    return make_problem


@pytest.fixture
def user_file(tmp_path):
    """A user's model file with a sigmoid RNN (and a model named like a zoo one)."""
    from cli_support import USER_MODELS

    path = tmp_path / "user_models.py"
    path.write_text(USER_MODELS, encoding="utf-8")
    return path


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a long proof, scheduled first so that the workers finish together")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """Slow tests first: pytest-xdist hands them out before the short ones fill the gaps."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
