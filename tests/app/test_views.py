"""The UI's pure functions: word diffs, the version-tree DOT, the Compare table (escaping of
every untrusted piece), step lines in the paper's layout, token and cost sums."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from app_pages.compare_table import compare_html
from app_pages.costs import cost, money, usage_totals
from app_pages.page_text import (
    action_warning,
    edit_label,
    endpoint_problem,
    one_line,
    own_edit,
    provenance,
    replaced_text,
    step_lines,
)
from app_pages.textdiff import diff_html, word_diff
from app_pages.version_tree_dot import dot_quote, version_tree_dot
from trajectory.alignment import align_versions
from trajectory.records import EditInfo, ModelCall, Step, Usage

EVIL = '<script>alert(1)</script> <img src=x onerror=alert(1)> [link](http://evil) & "q"'


def test_word_diff_keeps_both_texts_and_marks_the_deleted_sentence():
    old = "Now I find a knife (1). Next, I need to take it. I also found a lettuce."
    new = "Now I find a knife (1). Next, I need to take it."
    d = word_diff(old, new)
    assert "".join(t for op, t in d if op != "insert") == old
    assert "".join(t for op, t in d if op != "delete") == new
    assert [t for op, t in d if op == "delete"] == [" I also found a lettuce."]
    assert not [t for op, t in d if op == "insert"]


def test_word_diff_word_granularity_and_empty_sides():
    d = word_diff("go to cabinet 1", "go to drawer 1")
    assert ("delete", "cabinet") in d and ("insert", "drawer") in d
    assert word_diff(None, "new text") == [("insert", "new text")]
    assert word_diff("old", "") == [("delete", "old")]
    assert word_diff("same", "same") == [("equal", "same")]


def test_diff_html_escapes_every_piece_before_marking():
    left, right = diff_html("safe " + EVIL, "safe text <b>bold</b>")
    for side in (left, right):
        assert "<script" not in side and "<img" not in side and "<b>" not in side
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in left and '<del class="rd-del">' in left
    assert "&lt;b&gt;bold&lt;/b&gt;" in right and '<ins class="rd-ins">' in right
    # only our own tags remain
    assert set(re.findall(r"</?([a-z]+)", left + right)) <= {"del", "ins"}


def _step(i, thought=None, action=None, obs=None, source="model", edit=None, sid=None, info=None):
    return Step(
        id=sid, index=i, thought=thought, action=action, observation=obs, source=source, edit=edit, info=info or {}
    )


def test_step_lines_follow_the_paper_formats():
    t = _step(1, thought="find a mug", obs="OK.")
    a = _step(2, action="go to cabinet 1", obs="The cabinet 1 is closed.")
    assert step_lines("alfworld", t) == [("Act 1", "think: find a mug"), ("Obs 1", "OK.")]
    assert step_lines("alfworld", a) == [("Act 2", "go to cabinet 1"), ("Obs 2", "The cabinet 1 is closed.")]
    w = _step(3, thought="search it", action="Search[X]", obs="X is Y.")
    assert step_lines("hotpotqa", w) == [
        ("Thought 3", "search it"),
        ("Action 3", "Search[X]"),
        ("Observation 3", "X is Y."),
    ]
    assert step_lines("fever", _step(1, action="Search[X]", obs="o")) == [
        ("Action 1", "Search[X]"),
        ("Observation 1", "o"),
    ]


def test_provenance_and_replaced_text():
    e = EditInfo(kind="rewrite_thought", index=2, old_thought="the old bad thought")
    s = _step(2, thought="new", source="human", edit=e)
    assert provenance(s) == "edited by a person (thought rewritten)"
    assert replaced_text(s) == "was thought: the old bad thought"
    assert provenance(_step(1, action="x")) == "model"
    assert provenance(_step(1, action="x", info={"carried_from": 4})) == "carried over"
    assert provenance(_step(1, action="x", source="imported")) == "imported"
    assert provenance(_step(1, action="x", source="human")) == "written by a person"
    ins = _step(3, thought="hint", source="human", edit=EditInfo(kind="insert_thought", index=3))
    assert provenance(ins) == "inserted by a person"
    assert replaced_text(ins) is None and replaced_text(_step(1, action="x")) is None


def _row(v, parent=None, name=None, steps=3, done=False, success=None, edits=0):
    return {
        "version": v,
        "parent_version": parent,
        "name": name,
        "steps": steps,
        "done": done,
        "success": success,
        "edits": edits,
        "status": "open",
    }


def test_version_tree_dot_escapes_labels_and_links_parents():
    rows = [
        _row(1, done=True, success=False),
        _row(2, 1, name='fix "hallucination"\\ here\nnext', edits=2),
        _row(3, 2, done=True, success=True, edits=1),
        _row(4, 1, steps=1, edits=0),
    ]
    rows[1]["edit"], rows[2]["edit"] = "thought rewritten @2", "thought inserted @4"
    rows[3]["status"] = "stopped"
    dot = version_tree_dot(rows, current=3, selected=2)
    assert "v1 -> v2;" in dot and "v2 -> v3;" in dot
    assert '\\"hallucination\\"' in dot and "\\\\ here" in dot and "\nnext" not in dot
    assert "(current)" in dot.split("v3 [", 1)[1] and "penwidth=3" in dot.split("v3 [", 1)[1]
    assert "thought rewritten @2 (2 edits in all)" in dot and "thought inserted @4 (1 edit in all)" in dot
    assert "1 step, stopped" in dot.split("v4 [", 1)[1] and "3 steps, failure" in dot.split("v1 [", 1)[1]
    assert dot_quote('a"b') == '"a\\"b"'
    if shutil.which("dot"):  # the real graphviz parser accepts it
        out = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True, timeout=20)
        assert out.returncode == 0, out.stderr
        assert "hallucination" in out.stdout


def test_compare_rows_mark_edits_and_regenerated_steps_without_diffing_them():
    s1 = _step(1, thought="plan", obs="OK.", sid=1)
    s2 = _step(2, thought="I found a lettuce. bad", obs="OK.", sid=2)
    s3 = _step(3, action="go to x", obs="nothing", sid=3)
    e = EditInfo(kind="rewrite_thought", index=2, replaced_step=2, old_thought=s2.thought)
    n2 = _step(2, thought="I found a knife.", obs="OK.", source="human", edit=e, sid=10)
    n3 = _step(3, action="go to y", obs="nothing", sid=11)
    n4 = _step(4, action="take knife", obs="You pick up", sid=12)
    rows = align_versions([s1, s2, s3], [s1, n2, n3, n4])
    assert [r.kind for r in rows] == ["same", "edited", "regenerated", "only"]
    html = compare_html("alfworld", rows, "v1", "v2", "failure", "success")
    body = html.split("</tr>")[1:]  # [0] is the header row
    assert '<del class="rd-del">lettuce. bad</del>' in body[1] and '<ins class="rd-ins">knife.</ins>' in body[1]
    assert "regenerated after the edit at step 2" in body[2] and "rd-del" not in body[2] and "rd-ins" not in body[2]
    assert "only in v2 after the edit at step 2" in body[3]


def test_compare_html_escapes_untrusted_text_everywhere():
    a = _step(1, action="go to x", obs=EVIL, sid=1)
    b = _step(
        1,
        action="go to y",
        obs=EVIL + " more",
        sid=2,
        source="human",
        edit=EditInfo(kind="rewrite_action", index=1, replaced_step=1, old_action="go to x"),
    )
    html = compare_html("alfworld", align_versions([a], [b]), "v1 <i>", "v2", "failure", "success")
    assert "<script" not in html and "<img" not in html and "<a " not in html and "<i>" not in html
    assert "&lt;script&gt;" in html and "[link](http://evil)" in html  # shown literally, as text
    assert '<del class="rd-del">x</del>' in html and '<ins class="rd-ins">y</ins>' in html
    assert 'class="rd-edited"' in html and "edited by a person (action rewritten)" in html
    tags = set(re.findall(r"<([a-z]+)", html))
    assert tags <= {"table", "colgroup", "col", "thead", "tbody", "tr", "th", "td", "div", "b", "span", "del", "ins"}


def test_small_labels_and_checks():
    assert one_line("a\n  b \n\nc") == "a b c"
    assert action_warning("alfworld", "go to drwer 2", ["go to drawer 2", "look"]).startswith(
        "'go to drwer 2' is not among"
    )
    assert action_warning("alfworld", "go to drawer 2", ["go to drawer 2"]) is None
    assert action_warning("alfworld", "think: hmm", ["look"]) is None
    assert "does not parse" in action_warning("hotpotqa", "Finish Marrowgate", None)
    assert action_warning("hotpotqa", "Finish[Marrowgate]", None) is None
    assert action_warning("fever", "search[x]", None) is None
    assert endpoint_problem("ftp://x").startswith("the endpoint must start with http")
    assert endpoint_problem("http://u:p@h/v1") and endpoint_problem("") is None
    assert money(None) == "" and money(0.01234) == "$0.0123"
    e1 = EditInfo(kind="delete_thought", index=2, replaced_step=5)
    e2 = EditInfo(kind="insert_thought", index=4)
    assert own_edit([e1, e2], [e1]) == e2 and own_edit([e1], [e1]) is None and own_edit([], []) is None
    assert edit_label(e1) == "thought deleted @2" and edit_label(e2) == "thought inserted @4"


def test_usage_totals_and_cost():
    calls = {
        1: ModelCall(
            id=1,
            model="m",
            api_style="completions",
            prompt_hash="h",
            prompt_chars=1,
            usage=Usage(prompt_tokens=100, completion_tokens=7),
        ),
        2: ModelCall(
            id=2,
            model="m",
            api_style="completions",
            prompt_hash="h",
            prompt_chars=1,
            usage=Usage(prompt_tokens=120, completion_tokens=5),
        ),
        3: ModelCall(
            id=3,
            model="m",
            api_style="completions",
            prompt_hash="h",
            prompt_chars=1,
            cached=True,
            usage=Usage(prompt_tokens=999, completion_tokens=999),
        ),
    }
    assert usage_totals([1, 2, 3, 99], calls) == (220, 12)
    assert cost(220, 12, {"prompt": 1.5, "completion": 2.0}) == pytest.approx((220 * 1.5 + 12 * 2.0) / 1e6)
    assert cost(220, 12, None) is None


def test_streamlit_config_is_local_with_xsrf_and_no_usage_stats():
    import tomllib
    from pathlib import Path

    cfg = tomllib.loads((Path(__file__).resolve().parents[2] / ".streamlit" / "config.toml").read_text())
    assert cfg["server"]["address"] == "127.0.0.1"
    assert cfg["server"]["enableXsrfProtection"] is True
    assert cfg["browser"]["gatherUsageStats"] is False


def test_compare_columns_keep_equal_widths_whatever_the_text():
    from app_pages.compare_table import COMPARE_CSS, compare_html

    html_ = compare_html("alfworld", [], "v1", "v2", "open", "success")
    assert '<col style="width: 50%"><col style="width: 50%">' in html_ and "table-layout: fixed" in COMPARE_CSS
