"""Issue 26 item 9: in the app, a base URL a page visitor types gets the launching person's
OPENAI_API_KEY only if it is the launch endpoint, one the launcher allowed (`--allow-endpoint`)
or one confirmed with `react-editor confirm`; otherwise no key, until someone types a key for
that endpoint alone (kept in memory, never in the database)."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from agent import client
from agent.client import ModelClient
from agent.endpoint_keys import EndpointKeys
from tests.scripted_server import ScriptedLLM
from trajectory.records import AgentConfig

KEY = "sk-launch-key-123456"


@pytest.fixture
def servers():
    with ScriptedLLM() as own, ScriptedLLM() as typed:
        own.set_default(" ok")
        typed.set_default(" ok")
        yield own, typed


def _auth(llm: ScriptedLLM) -> str:
    return llm.completion_requests[-1].headers.get("authorization", "")


def _call(url: str) -> None:
    ModelClient(AgentConfig(model="m", base_url=url, cache=False), api_key=KEY).complete("p", [])


def test_the_launch_key_goes_only_where_the_launcher_allowed(servers, monkeypatch):
    own, typed = servers
    guard = EndpointKeys(KEY, own.base_url)
    monkeypatch.setattr(client, "ENDPOINT_KEYS", guard)
    _call(own.base_url)
    assert _auth(own) == f"Bearer {KEY}"
    _call(typed.base_url + "/")  # typed in the page: not the launch endpoint
    assert KEY not in _auth(typed) and guard.waiting() == [typed.base_url.lower()]
    guard.give(typed.base_url, "sk-typed-for-this-one")
    _call(typed.base_url)
    assert _auth(typed) == "Bearer sk-typed-for-this-one" and guard.waiting() == []
    _call(own.base_url)
    assert _auth(own) == f"Bearer {KEY}"  # the typed key stays with its endpoint


def test_allowed_and_confirmed_endpoints_get_the_launch_key(servers, monkeypatch):
    own, typed = servers
    monkeypatch.setattr(client, "ENDPOINT_KEYS", EndpointKeys(KEY, "http://127.0.0.1:1/v1", [typed.base_url]))
    _call(typed.base_url)
    assert _auth(typed) == f"Bearer {KEY}"
    confirmed: list[str] = []
    monkeypatch.setattr(
        client, "ENDPOINT_KEYS", EndpointKeys(KEY, "http://127.0.0.1:1/v1", confirmed=lambda: confirmed)
    )
    _call(own.base_url)
    assert KEY not in _auth(own)
    confirmed.append(own.base_url)
    _call(own.base_url)
    assert _auth(own) == f"Bearer {KEY}"


def test_the_app_asks_for_a_key_for_that_endpoint_alone(monkeypatch, tmp_path):
    monkeypatch.setenv("REACT_EDITOR_DB", str(tmp_path / "a.db"))
    monkeypatch.delenv("REACT_EDITOR_TOKEN", raising=False)
    guard = EndpointKeys(KEY, "http://127.0.0.1:1/v1")
    guard.key_for("http://127.0.0.1:2/v1", KEY)  # a base URL typed in the page was sent no key
    monkeypatch.setattr(client, "ENDPOINT_KEYS", guard)
    st.cache_resource.clear()
    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "app.py"), default_timeout=30).run()
    assert any("127.0.0.1:2/v1 got no key" in t.value for t in at.sidebar.text)
    at.sidebar.text_input(key="endpoint_key_value_0").set_value("sk-typed-2")
    at = at.sidebar.button[0].click().run()
    assert guard.key_for("http://127.0.0.1:2/v1", KEY) == "sk-typed-2" and not guard.waiting()
    assert b"sk-typed-2" not in b"".join(f.read_bytes() for f in tmp_path.glob("a.db*"))
    st.cache_resource.clear()


def test_react_editor_app_passes_allowed_endpoints(monkeypatch, tmp_path, capsys):
    from react_editor import launch
    from react_editor.main import main

    started = []
    monkeypatch.setattr(launch, "serve", lambda argv, env: started.append(env) or 0)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert (
        main(
            [
                "app",
                "--no-browser",
                "--allow-endpoint",
                "http://gpu-box:8000/v1",
                "--base-url",
                "http://127.0.0.1:8000/v1",
            ]
        )
        == 0
    )
    assert started[0]["REACT_EDITOR_ALLOWED_ENDPOINTS"] == "http://gpu-box:8000/v1"
    assert started[0]["OPENAI_BASE_URL"] == "http://127.0.0.1:8000/v1"
    capsys.readouterr()
    assert main(["app", "--no-browser", "--allow-endpoint", "http://gpu-box:8000/v1?key=SEKRIT"]) == 2
    err = capsys.readouterr().err
    assert "SEKRIT" not in err and err.count("\n") == 1 and len(started) == 1
