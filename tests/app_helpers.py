"""Helpers the AppTest tests share: the app's path, scripted runs, clicks and rendered text (not tests).
The `app` fixture itself is in tests/conftest.py."""

from __future__ import annotations

import html
import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.toy_envs import ROOM_TASK
from trajectory.records import AgentConfig

APP = str(Path(__file__).resolve().parent.parent / "app.py")

EVIL = "<script>alert(1)</script> <img src=x onerror=alert(1)> [link](http://evil)"

WIN = [
    " think: I need a mug; it may be in the cabinet.",
    " go to cabinet 1",
    " open cabinet 1",
    " take mug 1 from cabinet 1",
    " go to table 1",
    " put mug 1 in/on table 1",
]


def cfg(llm, **kw) -> AgentConfig:
    return AgentConfig(**{"model": "scripted-model", "base_url": llm.base_url, "max_retries": 1, "timeout_s": 5, **kw})


def texts(at) -> list[str]:
    return [t.value for t in at.text]


def markdownish(at) -> list[str]:
    """Everything rendered through markdown (markdown, captions, alerts, titles)."""
    out = [m.value for m in at.markdown] + [c.value for c in at.caption]
    out += [e.value for e in at.error] + [e.value for e in at.warning] + [e.value for e in at.info]
    out += [e.value for e in at.success] + [t.value for t in at.title] + [s.value for s in at.subheader]
    return out


def captions(at) -> list[str]:
    """Every caption's text: st.caption's and state.plain_caption's (escaped text in an html box)."""
    out = [c.value for c in at.caption]
    for h in at.get("html"):
        m = re.match(r'<div class="re-caption"[^>]*>(.*)</div>$', h.proto.body, re.S)
        if m:
            out.append(html.unescape(m.group(1)))
    return out


def alerts(at, kind: str) -> list[str]:
    """The text of each state.alert box of this kind ("error", "warning", ...): headline, then message."""
    out = []
    for h in at.get("html"):
        if f"re-alert-{kind}" in h.proto.body:
            parts = re.findall(r"<div[^>]*>([^<]*)</div>", h.proto.body)
            out.append(" ".join(html.unescape(p) for p in parts))
    return out


def box(at, label: str):
    """The one selectbox with this label (selector keys carry their labels' state)."""
    (found,) = [s for s in at.selectbox if s.label == label]
    return found


def version_box(at):
    return box(at, "Version")


def ok(at) -> AppTest:
    assert not at.exception, at.exception
    return at


def click(at, key: str) -> AppTest:
    return ok(at.button(key=key).click().run())


def opened(toy, make, *script: str, task=ROOM_TASK, human: bool = False):
    """A new episode (the model scripted with `script`) open in the Editor, optionally in
    human agent mode: (episode, version, AppTest)."""
    toy.llm.push(*script)
    ep, v = toy.engine.start_episode(task, cfg(toy.llm))
    at = make("editor", episode=ep.id)
    if human:
        at.toggle(key="human_mode").set_value(True).run()
    return ep, v, at


def take(at, box: str, text: str) -> AppTest:
    """Type `text` into a human-mode box and press "Take this step"."""
    at.text_area(key=box).set_value(text)
    return click(at, "h_submit")


def _won(toy):
    toy.llm.push(*WIN)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.run(v.id)
    return ep, v


def _open_edit(at, vid, k):
    return click(at, f"editbtn_{vid}_{k}")


def _long(toy, n: int = 12):
    """An episode of n human steps (a long version)."""
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    for i in range(n):
        toy.engine.human_step(v.id, action="go to shelf 1" if i % 2 else "go to table 1")
    return ep, v
