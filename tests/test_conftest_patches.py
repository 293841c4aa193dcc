"""The session speed-ups of tests/conftest.py that replace Streamlit's and httpx's internals still
hit: each patched attribute exists with the signature its replacement mirrors, the replacement is
installed, and a real AppTest run (or httpx client) calls it. An upgrade that renames, reshapes or
stops calling one fails here instead of silently changing what the other tests exercise."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from streamlit.components.v2 import manifest_scanner
from streamlit.runtime.scriptrunner.script_cache import ScriptCache
from streamlit.testing.v1 import AppTest, app_test, local_script_runner

SCRIPT = "import streamlit as st\nst.write('patched')\n"


def _params(fn: Callable[..., Any]) -> list[tuple[str, Any]]:
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]


def _counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    """Count the calls of `owner.name` (the installed replacement) for the rest of the test."""
    calls: list[int] = []
    installed = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return installed(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def _run_app() -> None:
    at = AppTest.from_string(SCRIPT, default_timeout=30).run()
    assert not at.exception and [m.value for m in at.markdown] == ["patched"]


def test_the_component_manifest_scan_is_replaced_and_an_app_run_calls_it(monkeypatch):
    installed = manifest_scanner.scan_component_manifests
    original = installed._conftest_replaces
    assert _params(original) == [("max_workers", None)] == _params(installed)
    calls = _counting(monkeypatch, manifest_scanner, "scan_component_manifests")
    _run_app()
    assert calls  # (BidiComponentManager.discover_and_register_components imports it at each call)


def test_the_script_cache_is_shared_and_an_app_run_compiles_through_it(monkeypatch):
    for module in (app_test, local_script_runner):
        assert module.ScriptCache._conftest_replaces is ScriptCache
    shared = app_test.ScriptCache()
    assert isinstance(shared, ScriptCache) and shared is local_script_runner.ScriptCache()
    assert _params(ScriptCache.get_bytecode) == [
        ("self", inspect.Parameter.empty),
        ("script_path", inspect.Parameter.empty),
    ]
    assert isinstance(shared._cache, dict) and hasattr(shared._lock, "acquire")  # (what the replacement reads)
    made_by_app = _counting(monkeypatch, app_test, "ScriptCache")  # (AppTest._run: the pages' cache)
    made_by_runner = _counting(monkeypatch, local_script_runner, "ScriptCache")  # (LocalScriptRunner.__init__)
    compiled = _counting(monkeypatch, shared, "get_bytecode")
    _run_app()
    assert made_by_app and made_by_runner and compiled


def test_the_run_wait_is_replaced_and_an_app_run_waits_through_it(monkeypatch):
    installed = local_script_runner.require_widgets_deltas
    original = installed._conftest_replaces
    assert _params(original) == [("runner", inspect.Parameter.empty), ("timeout", 3)] == _params(installed)
    calls = _counting(monkeypatch, local_script_runner, "require_widgets_deltas")
    _run_app()
    assert calls  # (LocalScriptRunner.run calls the module's function by name)


def test_the_tls_context_is_built_once_and_a_client_asks_for_it(monkeypatch):
    from httpx._transports import default

    installed = default.create_ssl_context
    original = installed._conftest_replaces
    assert [n for n, _ in _params(original)][:3] == ["verify", "cert", "trust_env"]
    made: list[Any] = []

    def recorded(*args: Any, **kwargs: Any) -> Any:
        made.append(installed(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(default, "create_ssl_context", recorded)
    with httpx.Client(), httpx.Client():  # each builds its transport's context through it
        pass
    assert len(made) == 2 and made[0] is made[1]  # (one context for both: the replacement's)
