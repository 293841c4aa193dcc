"""One job system: every long operation is a job of the database that any face can list,
follow and stop; connections are per thread; experiment items are claimed under leases;
rollouts are crash-safe and never move the current version; `react-editor app` takes its
server down with it. Each test failed before the change it names."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path

import pytest

import sessions.jobs
from agent import experiment_runner, jobs
from sessions import experiments
from sessions.store import Store, StoreError
from tests.cli_helpers import cli
from tests.experiment_agents import wiki_agent
from tests.job_processes import HOTPOT, _env, _episode, _experiment, _per_task, _spawn, _wait
from tests.scripted_server import Reply
from trajectory.records import AgentConfig


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


# ---------------------------------------------------------------------- 1: connections


def test_a_reader_thread_never_sees_a_row_another_thread_rolls_back(tmp_path):
    store = Store(tmp_path / "c.db")
    inside, read = threading.Event(), threading.Event()
    seen: list = []

    def writer() -> None:
        try:
            with store.transaction():
                store.db.execute("insert into settings (key, value) values ('ghost', '1')")
                inside.set()
                read.wait(10)
                raise RuntimeError("roll back")
        except RuntimeError:
            pass

    t = threading.Thread(target=writer)
    t.start()
    assert inside.wait(10)
    seen.append(store.settings.get("ghost"))  # this thread, while the writer's transaction is open
    read.set()
    t.join(10)
    assert seen == [None] and store.settings.get("ghost") is None
    store.close()


# ---------------------------------------------------------------------- 3: two runners, leases


def _claimed(db: Path) -> int:
    with closing(sqlite3.connect(db)) as raw:
        return raw.execute("select count(*) from experiment_items where claimed_by is not null").fetchone()[0]


def test_two_processes_resuming_one_experiment_share_its_items(tmp_path, scripted_llm, capsys):
    """Two runners in two processes: a child, and this test's own process once the child holds
    items (a runner here costs no interpreter start and no imports: they are loaded)."""
    scripted_llm.set_responder(wiki_agent({r["question"]: r["answer"] for r in HOTPOT}, latency_s=0.15, react_steps=2))
    db = tmp_path / "x.db"
    _experiment(db, scripted_llm, 10)
    args = ["experiment", "resume", "x", "--db", db, "--json", "--concurrency", "2"]
    child = _spawn(args, _env(tmp_path))
    _wait(lambda: _claimed(db) >= 1 or child.poll() is not None, timeout=120)
    assert child.poll() is None, child.communicate()[1]
    code, _, here_err = cli(capsys, *map(str, args))
    _, child_err = child.communicate(timeout=180)
    assert [child.returncode, code] == [0, 0], [child_err, here_err]
    with closing(Store(db)) as store:
        items = experiments.items(store, 1)
        assert all(it.status == "done" and it.success for it in items)  # none lost
        assert len(store.episodes.ids()) == 10
        for it in items:  # each item ran once: one clean two-step version, two model calls
            assert [s.index for s in store.versions.steps(it.version_id)] == [1, 2]
    calls = _per_task(scripted_llm)
    assert len(calls) == 10 and set(calls.values()) == {2}, calls
    with closing(Store(db)) as store:
        ran = [j for j in sessions.jobs.listing(store) if j.kind == "experiment"]
    assert len(ran) == 2 and {j.state for j in ran} == {"done"} and len({j.owner for j in ran}) == 2


def test_a_runner_killed_with_9_leaves_its_items_to_the_next_after_the_lease(tmp_path, scripted_llm, capsys):
    answers = {r["question"]: r["answer"] for r in HOTPOT}
    scripted_llm.set_responder(wiki_agent(answers, latency_s=0.3, react_steps=2))
    db = tmp_path / "x.db"
    _experiment(db, scripted_llm, 8)
    first = _spawn(
        ["experiment", "resume", "x", "--db", db, "--concurrency", "2"], _env(tmp_path, REACT_EDITOR_LEASE_S="3")
    )

    def some_done() -> bool:
        with closing(Store(db)) as store:
            return experiments.counts(store, 1).get("done", 0) >= 2

    _wait(some_done)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    scripted_llm.set_responder(wiki_agent(answers, react_steps=2))  # the latency was for the kill only
    with closing(sqlite3.connect(db)) as raw:  # as if it ran on another machine: only its lease can tell
        raw.execute("update jobs set owner = 'elsewhere:1'")
        raw.commit()
        held = raw.execute("select count(*) from experiment_items where claimed_by is not null").fetchone()[0]
    assert held >= 1
    code, out, err = cli(capsys, "experiment", "resume", "x", "--db", str(db), "--json", "--concurrency", "2")  # here
    assert code == 0, err
    assert json.loads(out.strip().splitlines()[-1])["done"] == 8
    with closing(Store(db)) as store:
        for it in experiments.items(store, 1):  # taken over, not run twice: each version is one clean run
            assert [s.index for s in store.versions.steps(it.version_id)] == [1, 2]
    code, out, _ = cli(capsys, "jobs", "--db", str(db), "--json")
    listed = json.loads(out)
    assert code == 0 and [j["state"] for j in listed if j["kind"] == "experiment"] == ["done", "stopped"]


# ---------------------------------------------------------------------- 5: Stop everywhere


def _tagged(tag: str) -> list[int]:
    """Processes whose environment carries `tag` (the runner and everything it started)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if tag.encode() in env:
            found.append(int(pid))
    return found


def test_jobs_stop_ends_a_processes_run_within_one_model_call(tmp_path, scripted_llm, capsys):
    scripted_llm.set_responder(wiki_agent({}, latency_s=0.4, react_steps=6))
    db = tmp_path / "x.db"
    proc = _spawn(
        [
            "experiment",
            "run",
            "--env",
            "hotpotqa",
            "--limit",
            "30",
            "--concurrency",
            "2",
            "--processes",
            "--name",
            "p",
            "--model",
            "m",
            "--base-url",
            scripted_llm.base_url,
            "--db",
            db,
            "--json",
        ],
        _env(tmp_path),
    )
    _wait(lambda: len(scripted_llm.completion_requests) >= 4, timeout=120)
    code, out, err = cli(capsys, "jobs", "--db", str(db), "--json")  # another process than the runner
    (job,) = [j for j in json.loads(out) if j["kind"] == "experiment"]
    assert job["state"] == "running" and job["target"] == "experiment p"
    assert {"id", "kind", "state", "target", "owner", "session", "progress", "error", "started", "updated"} <= set(job)
    code, out, err = cli(capsys, "jobs", "stop", str(job["id"]), "--db", str(db), "--json")
    at_stop = len(scripted_llm.completion_requests)
    assert code == 0 and json.loads(out)["stop_requested"] is True, err
    _, run_err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and run_err.strip().splitlines()[-1].startswith("stopped: "), run_err
    assert len(scripted_llm.completion_requests) - at_stop <= 2  # the calls in flight, one per worker
    with closing(Store(db)) as store:
        assert (
            sessions.jobs.get(store, job["id"]).state == "stopped" and experiments.get(store, "p").status == "stopped"
        )
        assert experiments.counts(store, 1).get("done", 0) < 30
    code, _, err = cli(capsys, "jobs", "stop", str(job["id"]), "--db", str(db))
    assert code != 0 and err.strip().count("\n") == 0 and "not running" in err


def test_processes_workers_exit_when_their_runner_is_killed(tmp_path, scripted_llm):
    scripted_llm.set_responder(wiki_agent({}, latency_s=0.5, react_steps=6))
    tag = f"REACT_EDITOR_TEST_TAG={os.getpid()}-{time.monotonic_ns()}"
    key, value = tag.split("=")
    db = tmp_path / "x.db"
    proc = _spawn(
        [
            "experiment",
            "run",
            "--env",
            "hotpotqa",
            "--limit",
            "6",
            "--concurrency",
            "2",
            "--processes",
            "--model",
            "m",
            "--base-url",
            scripted_llm.base_url,
            "--db",
            db,
        ],
        _env(tmp_path, **{key: value}),
    )
    _wait(lambda: len(scripted_llm.completion_requests) >= 2, timeout=120)
    assert len(_tagged(tag)) >= 3  # the runner, the fork server, its workers (and the resource tracker)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    _wait(lambda: not _tagged(tag), timeout=20, every=0.2)


def test_cot_sc_samples_run_at_once_and_stop_within_one_call(tmp_path, scripted_llm):
    lock, state = threading.Lock(), {"now": 0, "max": 0}
    agent = wiki_agent({r["question"]: r["answer"] for r in HOTPOT})

    def respond(body):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.3)
        with lock:
            state["now"] -= 1
        return agent(body)

    scripted_llm.set_responder(respond)
    db = tmp_path / "x.db"
    _experiment(db, scripted_llm, 1, method="cot-sc", samples=21)
    store = Store(db)
    h = jobs.start(
        store, "experiment", lambda h: experiment_runner.run(str(db), 1, concurrency=3, handle=h), experiment_id=1
    )
    _wait(lambda: len(scripted_llm.completion_requests) >= 6)
    jobs.stop(store, h.id)
    at_stop = len(scripted_llm.completion_requests)
    assert h.finished.wait(30)
    assert state["max"] == 3  # three samples at once, the experiment's concurrency
    assert len(scripted_llm.completion_requests) - at_stop <= 3 and at_stop < 21
    assert sessions.jobs.get(store, h.id).state == "stopped"
    item = experiments.items(store, 1)[0]
    assert item.status != "done" and len(store.calls.of_episode(item.episode_id)) == len(
        scripted_llm.completion_requests
    )
    store.close()


# ---------------------------------------------------------------------- 2 and 6: tabs, one status


def test_two_tabs_on_one_version_each_see_their_own_result(app):
    from tests.app_helpers import cfg as app_cfg
    from tests.app_helpers import click, ok, texts
    from tests.toy_envs import ROOM_TASK

    toy, make = app
    ep, v = toy.engine.start_episode(ROOM_TASK, app_cfg(toy.llm, cache=False, max_retries=0))
    a, b = make("editor", episode=ep.id), make("editor", episode=ep.id)
    toy.llm.push(Reply(status=500, message="backend exploded", delay_s=1.5))
    t = threading.Thread(target=lambda: a.button(key="btn_step").click().run(timeout=30))
    t.start()
    _wait(lambda: toy.llm.completion_requests)
    ok(b.run())  # the other tab, while A's step is in flight: progress with Stop, not A's job
    assert any(c.value.startswith("Job ") and "in another tab" in c.value for c in b.caption)
    t.join(30)
    _wait(lambda: not sessions.jobs.active(toy.store, episode_id=ep.id))
    ok(b.run())
    ok(a.run())
    assert any("backend exploded" in x for x in texts(a))  # the tab that started it sees its outcome
    ok(b.run())
    assert not any("backend exploded" in x for x in texts(b)) and not b.error
    toy.llm.push(" go to cabinet 1")
    click(b, "btn_step")  # B's own step: its result in B
    assert "Act 1: go to cabinet 1" in texts(b)


def test_the_selector_and_the_run_line_say_the_same(app):
    from tests.app_helpers import WIN, click, opened

    toy, make = app
    ep, v, at = opened(toy, make, *WIN)
    click(at, "btn_run_end")
    assert at.session_state["run"]
    label = [o for o in at.selectbox[0].options if o.startswith(f"v{v.id}")][0]
    assert "(running)" in label and any(c.value.startswith(f"v{v.id}: 1 step · running") for c in at.caption)
    assert toy.store.versions.get(v.id).status == "open"  # the face wrote nothing on the version


def test_a_frozen_version_stays_as_it_was_when_a_run_on_it_stops(toy):
    from sessions import annotations
    from tests.engine_scripts import cfg
    from tests.toy_envs import ROOM_TASK

    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.human_step(v.id, action="go to cabinet 1")
    annotations.annotate_version(toy.store, v.id, verdict="failure", by="ann")
    before = toy.store.versions.get(v.id)
    toy.llm.push(" open cabinet 1")
    calls = []
    rep = toy.engine.run(v.id, on_step=calls.append, should_stop=lambda: bool(calls))
    assert rep.stopped and rep.continued_from == v.id
    assert toy.store.versions.get(v.id) == before  # the frozen parent did not change
    assert toy.store.versions.get(rep.version).status == "stopped"


# ---------------------------------------------------------------------- 7: shutdown


def test_react_editor_app_killed_with_sigterm_leaves_no_listener(tmp_path):
    from tests.launch_helpers import free_port, listening

    port = free_port()
    env = _env(tmp_path, REACT_EDITOR_DB=str(tmp_path / "a.db"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "react_editor", "app", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(lambda: listening(port), timeout=90, every=0.3)
        proc.send_signal(signal.SIGTERM)  # to the launcher only, as `kill PID` does
        proc.wait(30)
        _wait(lambda: not listening(port), timeout=15, every=0.2)
    finally:
        if proc.poll() is None:
            proc.kill()


# ---------------------------------------------------------------------- the CLI contract


def test_jobs_lists_a_run_of_another_process_and_bad_input_is_one_line(tmp_path, scripted_llm, capsys):
    db, ep, vid = _episode(tmp_path, scripted_llm)
    code, out, err = cli(capsys, "jobs", "--db", str(db), "--json")
    (run,) = json.loads(out)
    assert code == 0 and run["kind"] == "run" and run["state"] == "done" and run["episode"] == ep
    assert run["owner"].rsplit(":", 1)[1].isdigit() and run["progress"]["done"] == 2
    code, out, _ = cli(capsys, "jobs", "--db", str(db))
    assert code == 0 and out.splitlines()[0].startswith("id\tkind\tstate") and "\trun\tdone\t" in out
    for bad, needle in ((["jobs", "stop", "99"], "unknown job 99"), (["jobs", "stop", "x"], "is not a whole number")):
        code, _, err = cli(capsys, *bad, "--db", str(db))
        assert code != 0 and needle in err and err.strip().count("\n") == 0
    with closing(Store(db)) as store:
        with pytest.raises(StoreError):
            sessions.jobs.create(store, "nonsense")


def test_cli_lists_say_running_and_stopped_as_the_app_and_jobs_do(toy, capsys):
    """Issue 26 item 18: `versions`/`episodes` said "open" while `jobs` said "stopped"
    (a run killed with -9: its lease ran out) or a run was going on."""
    from react_editor.main import main

    db = str(toy.db)

    def listing(*argv: str) -> str:
        assert main([*argv, "--db", db]) == 0
        return capsys.readouterr().out

    assert main(["run", "--env", "alfworld", "--task", "toy/room-1", "--human", "--db", db]) == 0
    capsys.readouterr()
    job = sessions.jobs.create(toy.store, "run", episode_id=1, version_id=1, target="episode 1 v1")
    assert "\trunning\t" in listing("versions", "1") and "\trunning\t" in listing("episodes")
    assert json.loads(listing("versions", "1", "--json"))[0]["state"] == "running"
    with toy.store.transaction():  # the runner died (kill -9): its lease lapsed without a heartbeat
        toy.store.db.execute("update jobs set lease_until = ? where id = ?", [time.time() - 1, job.id])
    assert f"{job.id}\trun\tstopped\t" in listing("jobs")
    assert "\tstopped\t" in listing("versions", "1") and "\tstopped\t" in listing("episodes")
    assert "\topen\t" not in listing("versions", "1")


def test_an_app_job_names_the_version_as_people_read_it(toy):
    """Issue 26 item 18: `jobs` showed "episode 2 v2" for an episode whose only version is v1."""
    from app_pages import stepjobs

    toy.engine.start_episode(toy.envs.ROOM_TASK, AgentConfig(base_url=toy.llm.base_url, model="m"))
    ep2, v = toy.engine.start_episode(toy.envs.ROOM_TASK, AgentConfig(base_url=toy.llm.base_url, model="m"))
    assert (ep2.id, v.id) == (2, 2)
    toy.llm.push(Reply("Think: first.\nAction: go to cabinet 1"))
    h = stepjobs.start(toy.engine, "tab", v.id)  # the app's step job
    assert h.finished.wait(30)
    (job,) = [j for j in sessions.jobs.listing(toy.store) if j.kind == "step"]
    assert job.target == "episode 2 v1"
