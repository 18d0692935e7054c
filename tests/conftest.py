"""Fixtures shared by the tests, and the hooks that run tests marked `background` in
worker processes while the rest of the suite runs (background.py)."""

import background
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
    config.addinivalue_line("markers", "background: run in a worker process while the suite runs (background.py)")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """Background tests run last: their work runs meanwhile."""
    items.sort(key=background.is_background)


def pytest_collection_finish(session):
    """Start the selected background tests in worker processes once collection is done."""
    selected = [item for item in session.items if background.is_background(item)]
    if selected and not session.config.option.collectonly:
        background.start(selected)


def pytest_pyfunc_call(pyfuncitem):
    """A background test's call waits for its worker."""
    if background.started(pyfuncitem):
        print(background.outcome(pyfuncitem), end="")
        return True
    return None


def pytest_sessionfinish(session):
    background.stop()
