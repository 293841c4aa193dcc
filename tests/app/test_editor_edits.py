"""The Editor's edits and human mode through streamlit.testing.v1.AppTest: edit, delete and
insert thoughts, rewrite an action, a bad edit, human steps with suggestions and warnings, the
expert's hint; on the toy environments (tests/toy_envs.py) with the scripted model server."""

from __future__ import annotations

from tests.app_helpers import WIN, _open_edit, _won, cfg, click, ok, opened, take, texts, version_box
from tests.toy_envs import ROOM_TASK, WIKI_TASK


def test_edit_thought_keep_later_steps(app):
    toy, make = app
    ep, v = _won(toy)
    at = make("editor", episode=ep.id)
    _open_edit(at, v.id, 1)
    assert at.radio(key=f"ed_kind_{v.id}_1").options == [
        "Rewrite thought",
        "Delete thought",
        "Insert a thought before this step",
        "Insert a thought after this step",
        "Resume from here",
    ]
    at.text_area(key=f"ed_thought_{v.id}_1").set_value("The mug is in the cabinet.")
    at.radio(key=f"ed_keep_{v.id}_1").set_value("Keep the later steps")
    click(at, f"ed_apply_{v.id}_1")
    cur = toy.store.episodes.get(ep.id).current_version
    assert cur != v.id and at.query_params["version"] == str(cur)
    new = toy.store.versions.steps(cur)
    assert new[0].thought == "The mug is in the cabinet." and new[0].source == "human" and len(new) == 6
    assert toy.store.versions.get(cur).outcome.success is True
    assert toy.store.versions.steps(v.id)[0].thought == WIN[0].strip()[len("think: ") :]  # old version as it was
    assert "Step 1 · edited by a person (thought rewritten)" in [c.value for c in at.caption]
    (diff,) = [h.proto.body for h in at.get("html") if 'class="rd-was"' in h.proto.body]
    assert diff.count("it may be") == 1 and diff.count("cabinet") == 1 and "thought edited:" in diff  # old text once


def test_delete_thought_regenerate_then_run(app):
    toy, make = app
    ep, v = _won(toy)
    at = make("editor", episode=ep.id)
    _open_edit(at, v.id, 1)
    at.radio(key=f"ed_kind_{v.id}_1").set_value("Delete thought").run()
    at.radio(key=f"ed_keep_{v.id}_1").set_value("Regenerate from here")
    click(at, f"ed_apply_{v.id}_1")
    cur = toy.store.episodes.get(ep.id).current_version
    assert toy.store.versions.steps(cur) == []
    assert toy.store.versions.get(cur).edits[0].kind == "delete_thought"
    toy.llm.push(*WIN[1:])  # not the deleted thought again (the cache would answer the same prompt)
    toy.store.calls.clear_cache()
    click(at, "btn_run_end")
    for _ in range(8):
        if not at.session_state["run"]:
            break
        ok(at.run())
    assert toy.store.versions.get(cur).outcome.success is True and len(toy.store.versions.steps(cur)) == 5


def test_insert_thought_after_and_resume_from_here(app):
    toy, make = app
    ep, v = _won(toy)
    at = make("editor", episode=ep.id)
    _open_edit(at, v.id, 2)
    at.radio(key=f"ed_kind_{v.id}_2").set_value("Insert a thought after this step").run()
    at.text_area(key=f"ed_insert_{v.id}_2").set_value("Hint: open the cabinet first.")
    at.radio(key=f"ed_keep_{v.id}_2").set_value("Regenerate from here")
    click(at, f"ed_apply_{v.id}_2")
    ins = toy.store.episodes.get(ep.id).current_version
    steps = toy.store.versions.steps(ins)
    assert len(steps) == 3 and steps[2].thought == "Hint: open the cabinet first." and steps[2].index == 3
    assert "Act 3: think: Hint: open the cabinet first." in texts(at)
    # resume from step 1 of the inserted version
    _open_edit(at, ins, 1)
    at.radio(key=f"ed_kind_{ins}_1").set_value("Resume from here").run()
    click(at, f"ed_apply_{ins}_1")
    br = toy.store.episodes.get(ep.id).current_version
    assert br not in (v.id, ins) and len(toy.store.versions.steps(br)) == 1
    assert toy.store.versions.get(br).parent_version == ins


def test_rewrite_action_with_admissible_suggestions(app):
    toy, make = app
    ep, v = _won(toy)
    at = make("editor", episode=ep.id)
    _open_edit(at, v.id, 2)
    at.radio(key=f"ed_kind_{v.id}_2").set_value("Rewrite action").run()
    sugg = at.selectbox(key=f"ed_sugg_{v.id}_2")
    assert "open cabinet 1" in sugg.options and "go to table 1" in sugg.options
    sugg.set_value("go to table 1").run()  # the suggestion fills the action box
    assert at.text_area(key=f"ed_action_{v.id}_2").value == "go to table 1"
    click(at, f"ed_apply_{v.id}_2")
    cur = toy.store.episodes.get(ep.id).current_version
    steps = toy.store.versions.steps(cur)
    assert len(steps) == 2 and steps[1].action == "go to table 1"
    assert steps[1].observation == "On the table 1, you see nothing."  # executed again by the env
    assert "Obs 2: On the table 1, you see nothing." in texts(at)


def test_bad_edit_shows_error_and_writes_nothing(app):
    toy, make = app
    ep, v = _won(toy)
    at = make("editor", episode=ep.id)
    _open_edit(at, v.id, 1)
    at.text_area(key=f"ed_thought_{v.id}_1").set_value("   ")
    click(at, f"ed_apply_{v.id}_1")
    assert "the new thought is empty" in texts(at)
    assert len(toy.store.versions.of_episode(ep.id)) == 1


def test_human_mode_with_suggestions(app):
    toy, make = app
    ep, v, at = opened(toy, make, human=True)
    at.text_area(key=f"h_thought_{v.id}_0").set_value("First the cabinet.")
    at.selectbox(key=f"h_sugg_{v.id}_0").set_value("go to cabinet 1").run()
    assert at.text_area(key=f"h_action_{v.id}_0").value == "go to cabinet 1"
    click(at, "h_submit")
    steps = toy.store.versions.steps(v.id)
    assert [(s.thought, s.action, s.source) for s in steps] == [
        ("First the cabinet.", None, "human"),
        (None, "go to cabinet 1", "human"),
    ]
    assert "Obs 2: The cabinet 1 is closed." in texts(at)
    # fresh, empty boxes for the next turn (keyed by version and step count)
    assert at.text_area(key=f"h_thought_{v.id}_2").value == "" and at.text_area(key=f"h_action_{v.id}_2").value == ""
    assert at.selectbox(key=f"h_sugg_{v.id}_2").value is None
    click(at, "h_submit")  # empty: a one-line error, nothing written
    assert "write a thought or an action" in texts(at)
    assert len(toy.store.versions.steps(v.id)) == 2
    assert toy.llm.completion_requests == []  # no model involved


def test_human_mode_never_resends_a_taken_step_and_keys_text_per_version(app):
    toy, make = app
    ep, v, at = opened(toy, make, human=True)
    take(at, f"h_thought_{v.id}_0", "Line one\nline two.")
    assert [s.thought for s in toy.store.versions.steps(v.id)] == ["Line one line two."]  # joined, one line
    click(at, "h_submit")  # the old thought is not sent again
    assert len(toy.store.versions.steps(v.id)) == 1 and "write a thought or an action" in texts(at)
    # text typed for one version does not show up in another
    b = toy.engine.editor.branch(v.id, 0)
    toy.store.versions.set_current(ep.id, v.id)
    ok(at.run())
    at.text_area(key=f"h_thought_{v.id}_1").set_value("typed for v1 only")
    ok(at.run())
    version_box(at).set_value(b.id)
    ok(at.run())
    assert at.text_area(key=f"h_thought_{b.id}_0").value == ""


def test_human_mode_warns_before_a_malformed_action_uses_a_step(app):
    toy, make = app
    ep, v, at = opened(toy, make, human=True)
    take(at, f"h_action_{v.id}_0", "go to drwer 2")
    assert toy.store.versions.steps(v.id) == []
    boxes = [h.proto.body for h in at.get("html") if "re-alert-warning" in h.proto.body]  # the reason inside the box
    assert any("&#x27;go to drwer 2&#x27; is not among the" in b for b in boxes), boxes
    take(at, f"h_action_{v.id}_0", "go to cabinet 1")  # fixed: no question asked
    assert [s.action for s in toy.store.versions.steps(v.id)] == ["go to cabinet 1"]
    take(at, f"h_action_{v.id}_1", "dance")
    click(at, "h_confirm")  # the person insists: it runs
    assert [s.action for s in toy.store.versions.steps(v.id)] == ["go to cabinet 1", "dance"]
    # Wikipedia: an action that does not parse
    ep2, w, at2 = opened(toy, make, task=WIKI_TASK, human=True)
    take(at2, f"h_action_{w.id}_0", "Finish Marrowgate")
    assert toy.store.versions.steps(w.id) == [] and any("does not parse" in h.proto.body for h in at2.get("html"))
    take(at2, f"h_action_{w.id}_0", "Search[Velmora]")
    assert [s.action for s in toy.store.versions.steps(w.id)] == ["Search[Velmora]"]


def test_expert_hint_in_human_mode_and_in_an_action_edit(app, monkeypatch):
    toy, make = app
    from tests import toy_envs

    def hint(self, timeout_s=5.0):  # the toy's "expert": the next move of the known solution
        s = self.s
        if s["at"] != "cabinet 1":
            return "go to cabinet 1"
        return "take mug 1 from cabinet 1" if s["open"] else "open cabinet 1"

    monkeypatch.setattr(toy_envs.ToyRoom, "expert_hint", hint, raising=False)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.human_step(v.id, action="go to cabinet 1")
    at = make("editor", episode=ep.id)
    at.toggle(key="human_mode").set_value(True).run()
    click(at, f"h_{v.id}_1_hint")
    assert "open cabinet 1" in texts(at)
    click(at, f"h_{v.id}_1_use_hint")
    assert at.text_area(key=f"h_action_{v.id}_1").value == "open cabinet 1"
    click(at, "h_submit")
    assert [s.action for s in toy.store.versions.steps(v.id)] == ["go to cabinet 1", "open cabinet 1"]
    # rewriting step 1's action: the hint is for the state before step 1
    _open_edit(at, v.id, 1)
    at.radio(key=f"ed_kind_{v.id}_1").set_value("Rewrite action").run()
    click(at, f"ed_{v.id}_1_hint")
    assert "go to cabinet 1" in texts(at)


def test_wikipedia_thought_rewrite_regenerates_the_action(app):
    toy, make = app
    toy.llm.push(" I should search Velmora.\nAction 1: Search[Velmora]")
    ep, v = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    at = make("editor", episode=ep.id)
    click(at, "btn_step")
    assert "Thought 1: I should search Velmora." in texts(at) and "Action 1: Search[Velmora]" in texts(at)
    _open_edit(at, v.id, 1)
    assert "Insert a thought after this step" in at.radio(key=f"ed_kind_{v.id}_1").options  # a hint for step 2
    at.text_area(key=f"ed_thought_{v.id}_1").set_value("Search the capital Marrowgate directly.")
    at.radio(key=f"ed_keep_{v.id}_1").set_value("Regenerate from here")
    click(at, f"ed_apply_{v.id}_1")
    assert "Search the capital Marrowgate directly." in texts(at)  # the pending thought
    toy.llm.push(" Search[Marrowgate]")
    click(at, "btn_step")
    cur = toy.store.episodes.get(ep.id).current_version
    (s,) = toy.store.versions.steps(cur)
    assert s.thought == "Search the capital Marrowgate directly." and s.action == "Search[Marrowgate]"
    assert "Action 1: Search[Marrowgate]" in texts(at)
