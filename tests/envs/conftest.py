"""Fixtures of the environment tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def alfworld_session_cache(tmp_path_factory) -> Path:
    """A cache folder for ALFWorld translations and game logic shared by the session's test
    workers (pytest-xdist's workers have their folders under one root): a built-in game is
    translated once per session instead of once per worker and module. Entries are written
    whole (a temporary file, then a rename), so two workers may write one at once."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    return root / "alfworld-cache"
