"""Issue 12 in the app: the Editor's "What if…" panel (background rollouts with progress and
Stop, control vs treatment with intervals) and rollout groups on the Versions page."""

from __future__ import annotations

import time

from agent.rollouts import Request, resample
from app_pages.version_tree_dot import version_tree_dot
from app_pages.whatif_panel import chart_spec, rate_rows
from sessions import rollouts
from tests.app_helpers import _open_edit, _won, click, ok, texts
from tests.rollout_agents import Agent
from tests.scripted_server import Reply


def _wait(at, timeout_s: float = 60.0):
    """Rerun the page until the background rollouts are finished (AppTest does not tick)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        job = at.session_state["whatif_job"]
        if not job.running:
            return ok(at.run())
        time.sleep(0.1)
        ok(at.run())
    raise AssertionError("the rollouts did not finish")


def test_whatif_panel_runs_control_and_treatment(app):
    toy, make = app
    ep, v = _won(toy)
    toy.llm.set_responder(Agent(choose=lambda: " go to shelf 1"))
    at = make("editor", episode=ep.id)
    _open_edit(at, v.id, 2)
    at.number_input(key=f"wi_n_{v.id}_2").set_value(3)
    at.selectbox(key=f"wi_edit_{v.id}_2").set_value("Insert a thought before this step")
    ok(at.run())
    at.text_input(key=f"wi_text_{v.id}_2_insert_thought").set_value("The mug is in the cabinet.")
    click(at, f"wi_run_{v.id}_2")
    at = _wait(at)
    shown = texts(at)
    assert "control (as it was): 0/3 success, 95% CI 0-56%" in shown
    assert "treatment (edited): 3/3 success, 95% CI 44-100%" in shown
    assert any(t.startswith("Effect of the edit: +100 points, 95% CI [+") and "Boschloo" in t for t in shown)
    (chart,) = at.get("vega_lite_chart")
    assert '"y2": {"field": "hi"}' in chart.proto.spec  # the bars carry their intervals
    first = at.dataframe[0].value
    assert set(first["first regenerated step"]) == {"go to shelf 1", "go to cabinet 1"}
    kinds = sorted(g.kind for g in rollouts.groups(toy.store, ep.id))
    assert kinds == ["control", "treatment"]
    assert toy.store.episodes.get(ep.id).current_version == v.id  # the page stays on its version
    # the rollouts are one node per group on the Versions page, expandable
    (link,) = [p for p in at.get("page_link") if p.proto.label == "Open the rollouts in Versions"]
    assert "versions" in link.proto.page and f"episode={ep.id}" in link.proto.query_string
    at = make("versions", episode=ep.id)
    (g,) = at.get("graphviz_chart")
    assert "control @2: 0/3 success" in g.proto.spec and "treatment @2 (thought inserted): 3/3 success" in g.proto.spec
    assert "cluster_g" not in g.proto.spec
    closed = at.dataframe[0].value  # issue 44: a closed group is one row; its members are not read
    assert sorted(x for x in closed["version"] if x.endswith("rollouts")) == ["3 rollouts", "3 rollouts"]
    assert not any(x.startswith("r") for x in closed["version"]), list(closed["version"])
    at = make("versions", episode=ep.id)  # (AppTest reruns the first page after a switch)
    at.toggle(key="ver_expand_groups").set_value(True)
    ok(at.run())
    assert "cluster_g" in at.get("graphviz_chart")[0].proto.spec
    df = at.dataframe[0].value
    assert set(df["rollout group"]) == {"", "control @2: 0/3 success", "treatment @2 (thought inserted): 3/3 success"}
    assert sum(1 for x in df["version"] if x.startswith("r")) == 6  # open: every rollout, r1..r6


def test_whatif_panel_stop_keeps_finished_and_run_again_continues(app):
    toy, make = app
    ep, v = _won(toy)
    agent = Agent(choose=lambda: " go to cabinet 1")
    toy.llm.set_responder(lambda body: Reply(text=agent(body), delay_s=0.15))
    at = make("editor", episode=ep.id)
    _open_edit(at, v.id, 2)
    at.number_input(key=f"wi_n_{v.id}_2").set_value(6)
    at.number_input(key=f"wi_conc_{v.id}_2").set_value(1)
    click(at, f"wi_run_{v.id}_2")
    deadline = time.time() + 30
    while at.session_state["whatif_job"].progress[0] < 1 and time.time() < deadline:
        time.sleep(0.1)
    ok(at.run())
    assert any("Rollouts:" in p.proto.text for p in at.get("progress"))
    click(at, "wi_stop")
    at = _wait(at)
    (g,) = rollouts.groups(toy.store, ep.id)
    finished = [m for m in g.members.values() if toy.store.versions.get(m).outcome.done]
    assert 1 <= len(finished) < 6 and any("Stopped" in c.value for c in at.caption)
    assert not any(
        toy.store.versions.get(m).outcome.done is False and toy.store.versions.get(m).status == "open"
        for m in g.members.values()
    )  # the one in flight was marked stopped
    toy.llm.set_responder(agent)
    click(at, f"wi_run_{v.id}_2")
    at = _wait(at)
    (g2,) = rollouts.groups(toy.store, ep.id)
    assert g2.id == g.id and all(g2.members[p] == m for p, m in g.members.items())
    assert "resample: 6/6 success, 95% CI 61-100%" in texts(at)


def test_stop_cancels_the_rollouts_calls_in_flight(app):
    """Issue 38: Stop in the panel while every call hangs (a server that never answers) ends
    the job - the calls in flight are cancelled - and no request leaves after it. The 30 s wait
    only guards a hang (before the fix, the job waited for its calls' timeout and retries)."""
    from sessions import jobs

    toy, make = app
    ep, v = _won(toy)
    toy.llm.requests.clear()
    toy.llm.set_responder(lambda body: Reply(hang=True))
    at = make("editor", episode=ep.id)
    _open_edit(at, v.id, 2)
    at.number_input(key=f"wi_n_{v.id}_2").set_value(4)
    at.number_input(key=f"wi_conc_{v.id}_2").set_value(2)
    click(at, f"wi_run_{v.id}_2")
    deadline = time.time() + 30
    while len(toy.llm.completion_requests) < 2 and time.time() < deadline:
        time.sleep(0.02)
    h = at.session_state["whatif_job"].handle
    stopped_at = time.monotonic()
    click(at, "wi_stop")
    assert h.finished.wait(30), "Stop waited for the calls in flight"
    assert [r for r in toy.llm.completion_requests if r.received_at > stopped_at] == []
    assert jobs.get(toy.store, h.id).state == "stopped"
    (g,) = rollouts.groups(toy.store, ep.id)
    assert all(toy.store.versions.get(m).status == "stopped" for m in g.members.values())


def test_rate_rows_chart_and_group_nodes(toy, tmp_path):
    toy.llm.push(" think: go", *[" go to shelf 1"] * 3)
    from tests.engine_scripts import cfg
    from tests.toy_envs import ROOM_TASK

    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, max_steps=3))
    toy.engine.run(v.id)
    toy.llm.set_responder(Agent(choose=lambda: " go to shelf 1"))
    run = resample(toy.engine, Request(v.id, 2, 2, 0.5, None))
    rows = rate_rows(run.stats)
    assert rows == [{"arm": "resample", "rate": 0.0, "lo": 0.0, "hi": 65.8, "n": 2, "success": 0}]
    spec = chart_spec(rows)
    assert spec["layer"][1]["encoding"]["y2"] == {"field": "hi"}
    # issue 28 #17: level arm names, and the interval readable (caps and its figures written out)
    assert spec["layer"][0]["encoding"]["x"]["axis"]["labelAngle"] == 0
    assert [layer["mark"]["type"] for layer in spec["layer"]][2:] == ["tick", "tick", "text"]
    assert spec["data"]["values"][0]["interval"] == "0-65.8%"
    g = run.stats[0].group
    summaries = [{"version": v.id, "parent_version": None, "steps": 3, "success": False, "done": True}]
    summaries += [
        {"version": m, "parent_version": v.id, "steps": 3, "success": False, "done": True, "group": g.id}
        for m in g.members.values()
    ]
    dot = version_tree_dot(summaries, v.id, None, {g.id: 'resample @2: 0/2 "x"'})
    assert f"v{v.id} -> g{g.id};" in dot and dot.count(f"-> g{g.id}") == 1
    assert 'label="resample @2: 0/2 \\"x\\""' in dot and f"v{g.members[0]} [" not in dot
    dot = version_tree_dot(summaries, v.id, None, {g.id: "resample @2"}, expand=True)
    assert f"v{v.id} -> v{g.members[0]};" in dot and f"subgraph cluster_g{g.id}" in dot


def test_whatif_tests_the_fix_typed_in_the_edit_form_and_refuses_an_unchanged_treatment(app):
    toy, make = app
    ep, v = _won(toy)
    at = make("editor", episode=ep.id)
    _open_edit(at, v.id, 1)
    at.selectbox(key=f"wi_edit_{v.id}_1").set_value("Rewrite thought")
    ok(at.run())
    assert any("treatment equals the control" in w.value for w in at.warning)  # the unchanged thought is refused
    assert at.button(key=f"wi_run_{v.id}_1").disabled
    at.text_area(key=f"ed_thought_{v.id}_1").set_value("The mug is surely in cabinet 1.")
    ok(at.run())
    (box,) = [b for b in at.selectbox if b.label == "Edit (treatment)"]
    assert box.value == "Rewrite thought"  # typed once: the what-if tests it without typing it again
    (text,) = [t for t in at.text_input if t.label == "New text"]
    assert text.value == "The mug is surely in cabinet 1."
    assert not any("treatment equals the control" in w.value for w in at.warning)
