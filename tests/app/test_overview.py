"""See the whole trajectory and every edit at a glance (the Editor's overview, edits that stand
out, timing, tags, gold answers, per-episode version numbers, stop conditions), the what-if
panel's edits, and the Episodes / Settings / Export pages. AppTest over the toy environments
and the CLI in process; the scripted model server is the only stand-in."""

from __future__ import annotations

import re

import pytest

from app_pages.overview import strip_html
from sessions import annotations, numbering
from tests.app_helpers import EVIL, WIN, _long, _open_edit, alerts, captions, cfg, click, ok, texts
from tests.cli_helpers import cli, cli_json
from tests.toy_envs import ROOM_TASK, WIKI_TASK
from trajectory.records import Outcome, Step


def _won(toy):
    toy.llm.push(*WIN)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.run(v.id)
    return ep, v


def _blocks(at):
    """(id, proto) of every layout block on the page."""
    out = []

    def walk(node):
        p = getattr(node, "proto", None)
        if type(node).__name__ == "Block" and p is not None:
            out.append((p.id, p))
        for c in getattr(node, "children", {}).values():
            walk(c)

    walk(at._tree)
    return out


def _html(at) -> list[str]:
    return [h.proto.body for h in at.get("html")]


# ---------------------------------------------------------------------- 1: the trajectory is the page


def test_steps_flow_in_the_page_and_the_status_stays_reachable(app):
    toy, make = app
    ep, v = _long(toy, 12)
    at = make("editor", episode=ep.id)
    (box,) = [p for i, p in _blocks(at) if i.endswith("-steps_box")]
    assert box.height_config.use_content and not box.height_config.pixel_height  # no ~420 px inner scroll box
    assert any(i.endswith("-status_line") for i, _ in _blocks(at))
    css = "".join(_html(at))
    assert ".st-key-run_controls { position: sticky" in css and ".st-key-status_line { position: sticky" in css
    assert sum(1 for c in at.caption if re.fullmatch(r"Step \d+ · .*", c.value)) == 12


# ---------------------------------------------------------------------- 2: the overview strip


def _step(i, **kw):
    return Step(index=i, source=kw.pop("source", "model"), **kw)


def test_overview_strip_marks_every_step_and_never_carries_step_text():
    from trajectory.records import EditInfo

    steps = [_step(i, thought=EVIL, action=EVIL, observation=EVIL) for i in range(1, 51)]
    steps[9] = _step(
        10, source="human", action="go to desk 1", edit=EditInfo(kind="rewrite_action", index=10, old_action=EVIL)
    )
    steps[19] = _step(20, source="human", action="look")
    sig = [[] for _ in steps]
    sig[29] = ["repeated_action"]
    sig[49] = ["no_effect", "step_limit"]
    html = strip_html(steps, sig, Outcome(done=True, success=False))
    assert html.count('class="ov-mark') == 50
    assert all(f'href="#step-{i}"' in html for i in range(1, 51))
    assert 'class="ov-mark ov-edited" href="#step-10" title="Step 10 · edited by a person"' in html
    assert 'class="ov-mark ov-person" href="#step-20"' in html
    assert 'class="ov-mark ov-model ov-signal" href="#step-30" title="Step 30 · model · repeated action"' in html
    assert "ov-failure" in html.split('href="#step-50"')[0].rsplit("<a", 1)[1]
    assert "person: steps 10, 20" in html and "signals: steps 30, 50" in html
    assert "<script" not in html and "onerror" not in html and "evil" not in html


def test_editor_shows_the_strip_and_a_box_per_step_its_marks_scroll_to(app):
    toy, make = app
    ep, v = _won(toy)
    b = toy.engine.editor.edit(v.id, 2, "rewrite_action", "go to table 1")
    at = make("editor", episode=ep.id, version=b.id)
    strip = [h for h in _html(at) if 'class="ov-strip"' in h]
    assert len(strip) == 1 and strip[0].count('class="ov-mark') == len(toy.store.versions.steps(b.id))
    assert 'class="ov-mark ov-edited" href="#step-2"' in strip[0]
    boxes = [i for i, _ in _blocks(at) if re.search(r"-step_\d+$", i)]  # what the page script scrolls to
    assert [i.rsplit("_", 1)[1] for i in boxes] == ["1", "2"]


# ---------------------------------------------------------------------- 3: edited steps stand out


def test_an_edited_step_is_coloured_and_shows_its_old_text_as_a_diff(app):
    toy, make = app
    ep, v = _won(toy)
    b = toy.engine.editor.edit(v.id, 1, "rewrite_thought", "The mug is in the cabinet, I bet.", keep_rest=True)
    at = make("editor", episode=ep.id, version=b.id)
    css = "".join(_html(at))
    assert re.search(r"\.st-key-step_1 \{ background: #fff8c5; border: 2px solid #bf8700", css)
    assert ".st-key-step_2 " not in css and ".st-key-step_2," not in css
    (diff,) = [h for h in _html(at) if 'class="rd-was"' in h]
    assert '<del class="rd-del">' in diff and '<ins class="rd-ins">' in diff and "bet." in diff


# ---------------------------------------------------------------------- 4, 5: timing, tags and notes


def test_timing_and_tokens_per_step_and_for_the_version_on_demand(app):
    toy, make = app
    ep, v = _won(toy)
    at = make("editor", episode=ep.id)
    assert not any("completion tokens" in c.value for c in at.caption)
    at.toggle(key="show_timing").set_value(True)
    ok(at.run())
    per_step = [
        c.value
        for c in at.caption
        if re.fullmatch(r"[\d.]+ s · [\d,]+ prompt \+ [\d,]+ completion tokens · .*", c.value)
    ]
    assert len(per_step) == 6 and all("0 retries · 1 call" in c for c in per_step)
    (total,) = [c.value for c in at.caption if c.value.startswith("model total: ")]
    assert "6 calls" in total


def test_step_tags_and_notes_show_on_the_step(app):
    toy, make = app
    ep, v = _won(toy)
    s2 = toy.store.versions.steps(v.id)[1]
    annotations.tag_step(toy.store, s2.id, by="me", tags=["key step", "<b>x</b>"], note="the turn that matters")
    at = make("editor", episode=ep.id)
    assert "Tags: key_step, <b>x</b> · Note: the turn that matters" in texts(at)  # plain text, never markup


# ---------------------------------------------------------------------- 6: gold answer on a failure


def test_a_question_failure_shows_the_gold_answer_and_em_f1(app):
    toy, make = app
    toy.llm.push(" I think it is old.\nAction 1: Finish[1700]")
    ep, v = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    toy.engine.run(v.id)
    assert toy.store.versions.get(v.id).outcome.done and not toy.store.versions.get(v.id).outcome.success
    at = make("editor", episode=ep.id)
    box = [h for h in _html(at) if "re-alert-warning" in h]
    assert box and "Gold answer: 1650 · given: 1700 · EM 0 · F1 0.00" in box[0] and "Done: failure" in box[0]


# ---------------------------------------------------------------------- 7: per-episode version numbers


def test_versions_are_numbered_per_episode_in_the_pages(app):
    toy, make = app
    _won(toy)  # another episode takes the first global ids
    ep, v = _won(toy)
    b = toy.engine.editor.edit(v.id, 2, "rewrite_action", "go to table 1")
    assert b.id > 2 and numbering.numbers(toy.store, ep.id) == {v.id: 1, b.id: 2}
    at = make("editor", episode=ep.id, version=b.id)
    sel = [s for s in at.selectbox if s.label == "Version"][0]
    assert [o.split(" ")[0] for o in sel.options] == ["v1", "v2"]
    assert any(c.value.startswith("v2: ") for c in at.caption)
    vers = make("versions", episode=ep.id)
    df = vers.dataframe[0].value
    assert list(df["version"]) == ["v1", "v2"] and list(df["id"]) == [v.id, b.id]
    assert "v2" in vers.get("graphviz_chart")[0].proto.spec and f"v{b.id} [" in vers.get("graphviz_chart")[0].proto.spec


def test_cli_takes_ep_n_and_keeps_global_ids_in_json(toy, capsys):
    db = str(toy.db)
    toy.llm.push(*WIN)
    cli_json(
        capsys,
        "run",
        "--env",
        "alfworld",
        "--task",
        "toy/room-1",
        "--base-url",
        toy.llm.base_url,
        "--model",
        "m",
        "--db",
        db,
    )
    toy.llm.push(*WIN)
    r = cli_json(
        capsys,
        "run",
        "--env",
        "alfworld",
        "--task",
        "toy/room-1",
        "--base-url",
        toy.llm.base_url,
        "--model",
        "m",
        "--db",
        db,
    )
    ep, first = r["episode"], r["version"]
    code, out, err = cli(capsys, "branch", f"{ep}:1", "--step", "2", "--db", db)
    assert code == 0 and out.strip() == f"{ep}:2"
    rows = cli_json(capsys, "versions", str(ep), "--db", db)
    assert [(x["number"], x["id"]) for x in rows] == [(1, first), (2, rows[1]["id"])] and rows[1]["id"] > 2
    code, out, _ = cli(capsys, "versions", str(ep), "--db", db)
    assert "v2\tfrom v1\t2 steps" in out and f"v{rows[1]['id']}" not in out
    shown = cli_json(capsys, "show", f"{ep}:2", "--db", db)
    assert len(shown) == 2
    code, out, err = cli(capsys, "show", f"{ep}:9", "--db", db)
    assert code != 0 and "has no version v9 (it has v1..v2)" in err and len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------------- 10: what-if offers what applies


def test_whatif_and_edit_form_offer_only_edits_that_apply_with_one_wording(app):
    toy, make = app
    ep, v = _won(toy)
    at = make("editor", episode=ep.id)
    _open_edit(at, v.id, 2)  # "go to cabinet 1": an action, no thought
    wi = at.selectbox(key=f"wi_edit_{v.id}_2").options
    assert "Rewrite thought" not in wi and "Delete thought" not in wi
    assert wi == ["No edit (resample from this step)", "Insert a thought before this step", "Rewrite action"]
    form = at.radio(key=f"ed_kind_{v.id}_2").options
    assert "Delete thought" not in form and "Insert a thought before this step" in form
    assert "Insert a thought after this step" in form


def test_whatif_offers_only_the_edit_kinds_the_family_takes():
    """The what-if panel and the edit form filter by the same family edit kinds: an
    environment that takes fewer edits is never offered one its engine would refuse."""
    from types import SimpleNamespace

    from app_pages.page_text import applicable_edits
    from app_pages.whatif_panel import NO_EDIT, edit_options

    step = SimpleNamespace(thought="look around", action="go to desk 1")
    assert list(edit_options(step, {"rewrite_action"}).values()) == [None, "rewrite_action"]
    assert applicable_edits(step, allowed={"insert_thought"}) == ["insert_thought", "insert_after"]
    assert NO_EDIT in edit_options(step) and len(edit_options(step)) == 5  # no family filter: every kind that applies


# ---------------------------------------------------------------------- 16-19: lists, settings, downloads, words


def test_episodes_list_shows_the_task_line_and_the_type(app):
    toy, make = app
    _won(toy)
    toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    at = make()
    df = at.dataframe[0].value
    assert set(df["task"]) == {"Your task is to: put a mug in table.", WIKI_TASK.text}
    assert set(df["type"]) == {"pick_and_place_simple", "bridge"} and list(df.columns)[2] == "type"


def test_settings_has_no_done_box_on_load_and_alerts_hold_their_reason(app):
    toy, make = app
    at = make("settings")
    assert not at.success and not any("Done:" in h for h in _html(at))
    (box,) = [h for h in _html(at) if "re-alert" in h]
    assert "Model: none configured" in box and "No model configured" in box  # the reason inside the box


def test_downloads_are_named_after_what_they_hold(app):
    toy, make = app
    _won(toy)
    ep, v = _won(toy)
    at = make("export")
    at.text_input(key="exp-refs").set_value(f"{ep.id}")
    at.selectbox(key="exp-format").set_value("prompt")
    ok(at.run())
    [b for b in at.button if b.label == "Prepare export"][0].click().run()
    assert at.session_state["exp-data"][3] == f"episode-{ep.id}-v1.prompt.txt"
    from app_pages.export import download_name

    assert download_name("react-json", exemplar_set="my fixes/../x") == "exemplars-my-fixes-..-x.react-json.json"
    assert download_name("jsonl", rows=[(1, 1), (1, 2), (2, 3)]) == "3-versions-2-episodes.jsonl"  # not .jsonl.jsonl


def test_edit_kinds_are_words_wherever_people_read_them():
    from agent.rollouts import group_label

    class G:
        label, n = "treatment @2", 3
        edit = type("E", (), {"kind": "insert_thought"})()

    class S:
        group, success, n, pending = G(), 2, 3, 0

    assert group_label(S()) == "treatment @2 (thought inserted): 2/3 success"


def test_a_long_version_shows_earlier_steps_as_one_escaped_block_that_can_be_edited(app):
    toy, make = app
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    for i in range(40):
        toy.engine.human_step(v.id, action=f"go to shelf {EVIL}" if i == 3 else "go to table 1")
    at = make("editor", episode=ep.id)
    (block,) = [h for h in _html(at) if 'class="ov-step' in h]
    assert block.count('data-step="') == 10 and "<script" not in block and "&lt;script&gt;" in block
    assert sum(1 for c in at.caption if re.fullmatch(r"Step \d+ · .*", c.value)) == 30  # the newest are live
    # an earlier window in full: its steps keep their Edit buttons, and the panel opens under its step
    at.session_state[f"older_win_{v.id}"] = "1–10"  # the "Earlier steps in full" control
    ok(at.run())
    assert sum(1 for c in at.caption if re.fullmatch(r"Step \d+ · .*", c.value)) == 40
    assert not [h for h in _html(at) if 'class="ov-step' in h]
    click(at, f"editbtn_{v.id}_4")
    assert at.session_state["edit_at"] == (v.id, 4) and at.radio(key=f"ed_kind_{v.id}_4")


def test_version_references_typed_by_people_are_per_episode_numbers(toy, capsys):
    from sessions.exchange import parse_ref, select

    _won(toy)  # episode 1 takes the first global ids
    ep, v = _won(toy)
    b = toy.engine.editor.edit(v.id, 2, "rewrite_action", "go to table 1")
    (batch,) = select(toy.store, [parse_ref(f"{ep.id}:2")])
    assert [x.id for x in batch.versions] == [b.id] and b.id != 2
    (batch,) = select(toy.store, [parse_ref(f"{ep.id}:v1")])
    assert [x.id for x in batch.versions] == [v.id]
    with pytest.raises(Exception, match="has no version v7"):
        list(select(toy.store, [parse_ref(f"{ep.id}:7")]))
    code, out, err = cli(capsys, "annotate", f"{ep.id}:2", "--verdict", "failure", "--db", str(toy.db))
    assert code == 0, err
    assert annotations.version_annotation(toy.store, b.id).verdict == "failure"


# ---------------------------------------------------------------------- issue 28: panels where you are, why it stopped


def _order(at) -> list[str]:
    """The page's step captions and edit-panel radios, in the order they are drawn."""
    out = []

    def walk(node):
        t = type(node).__name__
        if t == "Caption" and re.fullmatch(r"Step \d+ · .*", node.value):
            out.append(node.value.split(" · ")[0])
        elif t == "Radio" and (node.key or "").startswith("ed_kind_"):
            out.append("edit panel")
        for c in getattr(node, "children", {}).values():
            walk(c)

    walk(at._tree)
    return out


@pytest.mark.parametrize("n,k", [(3, 2), (35, 33)])
def test_edit_panels_open_under_their_step_and_bring_it_into_view(app, n, k):
    toy, make = app
    ep, v = _long(toy, n)
    at = make("editor", episode=ep.id)
    _open_edit(at, v.id, k)
    order = _order(at)
    assert order[order.index(f"Step {k}") + 1] == "edit panel"  # under its step, not after the last one
    assert at.session_state["focus_step"][:2] == (v.id, k)
    assert any(i.endswith(f"-focus_step_{k}_{at.session_state['focus_step'][2]}") for i, _ in _blocks(at))
    assert any("Tags and note for step" in e.label for e in at.expander)


def test_a_search_hit_on_an_early_step_opens_the_editor_at_it(app):
    toy, make = app
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    for i in range(35):
        toy.engine.human_step(v.id, action="examine drawer 7" if i == 2 else "go to table 1")
    at = make("episodes")
    at.text_input(key="search_q").set_value("drawer").run()
    click(at, "search_open_0")
    at.switch_page("app_pages/editor.py")
    ok(at.run())
    assert at.session_state["edit_at"] == (v.id, 3) and at.session_state["focus_step"][:2] == (v.id, 3)
    order = _order(at)
    assert order[order.index("Step 3") + 1] == "edit panel"  # the early window is drawn in full, with its panel


def test_another_tab_shows_one_line_per_run(app):
    from sessions import jobs

    toy, make = app
    ep, v = _long(toy, 2)
    jobs.create(
        toy.store,
        "run",
        episode_id=ep.id,
        version_id=v.id,
        session="other-tab",
        lease_s=30,
        target=f"episode {ep.id} v{v.id}",
    )
    jobs.create(
        toy.store,
        "step",
        episode_id=ep.id,
        version_id=None,
        session="other-tab",
        lease_s=30,
        target=f"episode {ep.id} v{v.id}",
    )  # the step the run is taking
    at = make("editor", episode=ep.id)
    lines = [c.value for c in at.caption if "in another tab or process" in c.value]
    assert len(lines) == 1 and "(run," in lines[0]


def test_compare_headline_uses_the_selectors_status_words(app):
    from sessions import jobs

    toy, make = app
    ep, v = _long(toy, 2)
    b = toy.engine.editor.branch(v.id, 1)
    job = jobs.create(toy.store, "run", episode_id=ep.id, version_id=b.id, session="t", lease_s=30)
    jobs.finish(toy.store, job.id, "stopped")
    at = make("compare", episode=ep.id, left=v.id, right=b.id)
    assert [m.value for m in at.metric][:2] == ["open", "stopped"]
    assert any("(stopped)" in o for s in at.selectbox if s.label == "Right" for o in s.options)


def test_add_to_exemplar_set_from_the_annotation_panel_and_the_sets_table_shows_it(app):
    from sessions import exemplar_sets

    toy, make = app
    ep, v = _won(toy)
    at = make("versions", episode=ep.id)
    assert at.selectbox(key=f"ver-xset-{v.id}").value == "(new set)"
    assert at.text_input(key=f"ver-xnew-{v.id}").value == "alfworld-fixes"  # prefilled: nothing to type
    assert at.selectbox(key=f"ver-xbase-{v.id}").value == "the built-in exemplars"  # every task type kept
    click(at, f"ver-xadd-{v.id}")
    entries = exemplar_sets.entries(toy.store, "alfworld-fixes")
    assert [e.version_id for e in entries if e.version_id] == [v.id] and len(entries) > 1
    assert at.selectbox(key=f"ver-xset-{v.id}").value == "alfworld-fixes"
    assert any(c == "In exemplar set alfworld-fixes" for c in captions(at))
    assert any("Added to exemplar set 'alfworld-fixes'" in s for s in alerts(at, "success"))
    ex = make("export")
    (table,) = [d.value for d in ex.dataframe if "entries" in d.value.columns]
    assert list(table["name"]) == ["alfworld-fixes"] and list(table["entries"]) == [len(entries)]


def _step_boxes(node, out):
    """{key: the number of elements} of each step's box in the AppTest tree."""
    for child in getattr(node, "children", {}).values():
        key = getattr(getattr(child, "proto", None), "id", "") or ""
        m = re.search(r"step_(\d+)$", key)
        if m and getattr(child, "type", "") == "flex_container":
            out[int(m.group(1))] = len(child.children)
        _step_boxes(child, out)
    return out


def test_every_step_box_has_the_same_elements_so_a_moving_step_leaves_no_ghost_lines(app):
    """Issue 28 #21: past 30 steps each new step moves every box up one place, and a box
    keeps the elements of the one that was there that it does not overwrite (ghost lines)."""
    toy, make = app
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    for action in ("go to table 1", "go to table 1", f"go to shelf {EVIL}", "look"):
        toy.engine.human_step(v.id, action=action)
    at = make("editor", episode=ep.id)
    boxes = _step_boxes(at._tree, {})
    assert sorted(boxes) == [1, 2, 3, 4] and len(set(boxes.values())) == 1, boxes
