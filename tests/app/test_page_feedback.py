"""Issue 15 in AppTest: the Editor, Versions, Compare, Episodes and Export pages tell the
Figure-5 story and never surprise (toy environments, scripted model on 127.0.0.1)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from app_pages import stepjobs
from sessions import annotations, jobs
from tests.app_helpers import WIN, cfg, click, ok, opened, texts
from tests.scripted_server import Reply
from tests.toy_envs import ROOM_TASK, WIKI_TASK

ROOT = Path(__file__).resolve().parents[2]


def _won(toy):
    toy.llm.push(*WIN)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.run(v.id)
    return ep, v


def _captions(at) -> list[str]:
    return [c.value for c in at.caption]


# ---------------------------------------------------------------------- item 2: deletions show


def test_deleted_thought_has_a_marker_in_the_editor_and_a_row_in_compare(app):
    toy, make = app
    ep, v = _won(toy)
    gone = toy.engine.editor.edit(v.id, 1, "delete_thought", keep_rest=True)
    at = make("editor", episode=ep.id, version=gone.id)
    (exp,) = [e for e in at.expander if e.label == "Thought deleted here by a person (show it)"]
    assert "I need a mug; it may be in the cabinet." in [t.value for t in exp.text]
    cmp = make("compare", episode=ep.id, left=v.id, right=gone.id)
    metrics = {m.label: m.value for m in cmp.metric}
    assert metrics["Steps edited by a person"] == "1" and metrics["Steps that differ"] == "1"
    body = cmp.get("html")[0].proto.body
    assert body.count('<tr class="rd-edited rd-deleted">') == 1 and "— deleted by a person —" in body
    assert "<del" not in body and "<ins" not in body  # nothing else is word-diffed
    assert body.count('<tr class="rd-same">') == 5
    vers = make("versions", episode=ep.id)
    df = vers.dataframe[0].value
    assert df[df["id"] == gone.id].iloc[0]["edit"] == "thought deleted @1"


def test_inserted_hint_is_a_one_sided_row_not_a_rewrite(app):
    toy, make = app
    ep, v = _won(toy)
    ins = toy.engine.editor.edit(v.id, 3, "insert_thought", "Hint: open it.", keep_rest=True)
    cmp = make("compare", episode=ep.id, left=v.id, right=ins.id)
    body = cmp.get("html")[0].proto.body
    row = body.split("</tr>")[3]
    assert row.startswith('<tr class="rd-edited rd-inserted"><td>3</td><td><div class="rd-none">(no step)</div>')
    assert "thought inserted by a person" in row and "Hint: open it." in row
    assert "<td>3 / 4</td>" in body and "<del" not in body
    assert {m.label: m.value for m in cmp.metric}["Steps edited by a person"] == "1"
    ed = make("editor", episode=ep.id, version=ins.id)
    assert "Step 3 · inserted by a person" in _captions(ed)
    assert not any("nothing replaced" in t for t in texts(ed))


# ---------------------------------------------------------------------- item 3: a step in flight


def test_a_second_step_joins_the_first_and_stop_cancels_it(toy):
    toy.llm.push(Reply(text=" go to cabinet 1", delay_s=1.5), " go to table 1")
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, cache=False))
    a = stepjobs.start(toy.engine, "tab", v.id)
    b = stepjobs.start(toy.engine, "tab", v.id)  # a double click
    assert a is b and a.status().startswith("Calling the model… ")
    deadline = time.monotonic() + 10
    while not toy.llm.completion_requests and time.monotonic() < deadline:  # the request reached the server
        time.sleep(0.01)
    assert stepjobs.cancel(toy.store, "tab", v.id) and stepjobs.current(toy.store, "tab", v.id) is None
    assert a.finished.wait(10) and a.cancelled
    assert toy.store.versions.steps(v.id) == []  # the answer came after Stop: not used
    assert toy.store.versions.get(v.id).error is None
    assert len(toy.llm.completion_requests) == 1


def test_the_answer_streams_onto_the_step_job_token_by_token_and_stop_ends_it(toy):
    """Issue 38: the Editor shows the thought and action being written (`await_step` draws the
    job's `partial` as plain text while the call is in flight); Stop closes the stream and the
    version stays as it was."""
    toy.llm.push(Reply(text=" go to cabinet 1 and then a long wait", chunk_delay_s=30))
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, cache=False))
    job = stepjobs.start(toy.engine, "tab", v.id)
    deadline = time.monotonic() + 20
    while not job.partial and time.monotonic() < deadline:
        time.sleep(0.01)
    assert job.partial == " go"  # the first token, while the rest is being written
    assert stepjobs.cancel(toy.store, "tab", v.id)
    assert job.finished.wait(10), "Stop waited for the stream"  # a deadline: the next token comes in 30 s
    (call,) = toy.store.calls.of_episode(ep.id)
    assert call.error.startswith("cancelled") and toy.store.versions.steps(v.id) == []
    assert toy.store.versions.get(v.id).error is None


def test_dead_endpoint_is_retried_as_announced_then_shows_its_message(app, monkeypatch):
    """Issue 26 item 11: a refused connection is retried like any other failure (the first
    "cannot reach" used to stop the job), then the step fails with its one-line message."""
    from agent.model import retries

    monkeypatch.setattr(retries, "BACKOFF_BASE_S", 0.01)  # the retries, not their waits
    toy, make = app
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, base_url=dead, max_retries=4))
    at = make("editor", episode=ep.id)
    click(at, "btn_step")
    err = [x for x in texts(at) if "cannot reach the model server" in x]
    (call,) = toy.store.calls.of_episode(ep.id)  # 1 + the 4 retries announced
    assert call.attempts == 5 and call.error.endswith("(after 5 attempts)")
    assert err and err[0].startswith("model call failed: cannot reach the model server at http://127.0.0.1:")
    assert toy.store.versions.steps(v.id) == [] and not at.button(key="btn_step").disabled


def test_a_page_opened_during_a_call_waits_for_it_and_shows_its_step(app):
    toy, make = app
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.llm.push(Reply(text=" go to cabinet 1", delay_s=1.0))
    job = stepjobs.start(toy.engine, "another tab", v.id)
    at = make("editor", episode=ep.id)  # opens while another tab's call is in flight: shows it, with Stop
    assert any(f"Job {job.id} (step, episode {ep.id} v{v.id}) is running in another tab" in c.value for c in at.caption)
    assert at.button(key="btn_step").disabled and any(b.key == f"stop_job_{job.id}" for b in at.button)
    assert job.finished.wait(10)
    ok(at.run())
    assert "Act 1: go to cabinet 1" in texts(at) and not at.button(key="btn_step").disabled


# ---------------------------------------------------------------------- items 4, 5, 7: edits


def test_edit_boxes_are_text_areas_and_keep_is_off_by_default(app):
    toy, make = app
    ep, v = _won(toy)
    at = make("editor", episode=ep.id)
    click(at, f"editbtn_{v.id}_1")
    assert at.text_area(key=f"ed_thought_{v.id}_1").value == WIN[0].strip()[len("think: ") :]
    assert at.radio(key=f"ed_keep_{v.id}_1").value == "Regenerate from here"
    at.radio(key=f"ed_kind_{v.id}_1").set_value("Delete thought").run()
    assert at.radio(key=f"ed_keep_{v.id}_1").value == "Regenerate from here"


def test_edit_and_resume_applies_then_runs_n_steps(app):
    toy, make = app
    ep, v = _won(toy)
    at = make("editor", episode=ep.id)
    click(at, f"editbtn_{v.id}_1")
    at.text_area(key=f"ed_thought_{v.id}_1").set_value("The mug is in\nthe cabinet.")
    at.number_input(key=f"ed_resume_n_{v.id}_1").set_value(2)
    toy.llm.push(*WIN[1:])
    click(at, f"ed_resume_{v.id}_1")
    cur = toy.store.episodes.get(ep.id).current_version
    for _ in range(4):
        if not at.session_state["run"]:
            break
        ok(at.run())
    steps = toy.store.versions.steps(cur)
    assert steps[0].thought == "The mug is in the cabinet." and [s.action for s in steps[1:]] == [
        "go to cabinet 1",
        "open cabinet 1",
    ]
    assert toy.store.versions.get(cur).status == "open"


def test_finished_version_disables_step_and_run_and_offers_a_branch(app):
    toy, make = app
    ep, v = _won(toy)
    at = make("editor", episode=ep.id)
    for k in ("btn_step", "btn_run_n", "btn_run_end"):
        assert at.button(key=k).disabled
    assert (
        f"Step and Run are off for v{v.id}: it is finished. Branch from an earlier step to try another way."
        in _captions(at)
    )
    at.number_input(key=f"branch_k_{v.id}").set_value(3)
    click(at, "btn_branch")
    cur = toy.store.episodes.get(ep.id).current_version
    assert cur != v.id and len(toy.store.versions.steps(cur)) == 3
    assert not at.button(key="btn_step").disabled


# ---------------------------------------------------------------------- items 6, 12, 13: running


def test_status_line_sits_with_the_controls_and_the_prompt_wraps(app):
    toy, make = app
    ep, v, at = opened(toy, make, *WIN)
    assert f"v{v.id}: 0 steps · open" in _captions(at)
    click(at, "btn_step")
    assert f"v{v.id}: 1 step · open" in _captions(at)
    at.toggle(key="show_prompt").set_value(True)
    ok(at.run())
    assert at.code[0].proto.wrap_lines is True


def test_a_run_cut_by_a_reload_reads_stopped_and_a_guard_warns_about_typed_text(app):
    toy, make = app
    ep, v, at = opened(toy, make, *WIN)
    click(at, "btn_run_end")
    assert at.session_state["run"] and len(toy.store.versions.steps(v.id)) == 1
    # a reload is a new session: the old tab's run shows as running there, with Stop
    again = make("editor", episode=ep.id)
    (job,) = [j for j in jobs.active(toy.store, episode_id=ep.id) if j.kind == "run"]
    assert f"v{v.id}: 1 step · running" in _captions(again)
    assert any(c.value.startswith(f"Job {job.id} (run, episode {ep.id} v{v.id}) is running") for c in again.caption)
    # the old tab ticks no more: once its lease runs out the run reads stopped (its job says so)
    deadline = time.monotonic() + 30
    while jobs.get(toy.store, job.id).active and time.monotonic() < deadline:
        time.sleep(0.2)
    ok(again.run())
    assert f"v{v.id}: 1 step · stopped" in _captions(again) and toy.store.versions.get(v.id).status == "open"
    guard = [h.proto.body for h in again.sidebar.get("html") if "beforeunload" in h.proto.body]
    assert guard and "st-key-edit_panel_" in guard[0]


# ---------------------------------------------------------------------- items 8, 9, 10, 11


def test_versions_page_words_and_cost(app):
    toy, make = app
    ep, v = _won(toy)
    b = toy.engine.editor.branch(v.id, 2)
    toy.store.versions.update(b.id, status="stopped")
    at = make("versions", episode=ep.id)
    df = at.dataframe[0].value
    row = df[df["id"] == b.id].iloc[0]
    assert row["outcome"] == "stopped" and row["edit"] == f"branched from v{v.id}" and row["cost"] == ""
    spec = at.get("graphviz_chart")[0].proto.spec
    assert "2 steps, stopped" in spec and "6 steps, success" in spec and "None" not in spec


def test_editor_shows_the_endpoint_in_use_and_can_switch_it(app, monkeypatch):
    toy, make = app
    monkeypatch.setenv("OPENAI_BASE_URL", toy.llm.base_url)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, base_url=None, model="wrong-model"))
    at = make("editor", episode=ep.id)
    assert any(t.startswith(f"Endpoint: {toy.llm.base_url} (from OPENAI_BASE_URL)") for t in texts(at))
    at.text_input(key=f"cfg_url_{ep.id}").set_value("ftp://nope")
    click(at, "cfg_apply")
    assert any("must start with http" in t for t in texts(at))
    at.text_input(key=f"cfg_url_{ep.id}").set_value(toy.llm.base_url)
    at.text_input(key=f"cfg_model_{ep.id}").set_value("scripted-model")
    click(at, "cfg_apply")
    cur = toy.store.episodes.get(ep.id).current_version
    assert cur != v.id and at.query_params["version"] == str(cur)
    assert toy.store.episodes.get(ep.id).config.model == "scripted-model"
    toy.llm.push(WIN[0])
    click(at, "btn_step")
    assert toy.llm.completion_requests[-1].body["model"] == "scripted-model"
    assert "Model: scripted-model\nStyle: react · completions" in texts(at)


def test_labels_say_one_step_and_export_names_are_distinct_with_a_preview(app):
    toy, make = app
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.human_step(v.id, action="go to cabinet 1")
    at = make("editor", episode=ep.id)
    assert not any("1 steps" in x for x in _captions(at) + texts(at) + list(at.selectbox[0].options))
    ex = make("export")
    assert [t.value for t in ex.title] == ["Export and import"]
    assert "Export" not in [s.value for s in ex.subheader] and ex.radio(key="exp-source").label == "What to export"
    ex.selectbox(key="exp-format").set_value("prompt")
    ok(ex.run())
    ok(ex.button[[b.label for b in ex.button].index("Prepare export")].click().run())
    (code,) = ex.code
    assert "go to cabinet 1" in code.value and any("bytes" in t for t in texts(ex))


def test_episodes_list_names_first_and_a_label_filter(app):
    toy, make = app
    ep1, v1 = _won(toy)
    toy.store.episodes.rename(ep1.id, "won it")
    ep2, v2 = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    annotations.annotate_version(toy.store, v2.id, by="a", verdict="failure", failure_modes=["hallucination"])
    at = make()
    df = at.dataframe[0].value
    assert list(df.columns)[:7] == ["name", "task", "type", "outcome", "versions", "edits", "model"]
    assert at.selectbox(key="open_pick").options == [
        f"#{ep2.id} Question: When was the capital of Velmora founded?",
        f"#{ep1.id} won it",
    ]
    at.selectbox(key="f_label").set_value("hallucination")
    ok(at.run())
    assert list(at.dataframe[0].value["episode"]) == [ep2.id]


# ---------------------------------------------------------------------- item 14


def test_no_page_uses_material_icons():
    for f in [ROOT / "app.py", *sorted((ROOT / "app_pages").glob("*.py"))]:
        assert ":material/" not in f.read_text(), f
