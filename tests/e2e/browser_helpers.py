"""Playwright helpers the browser tests share: widgets by key, typing, waiting for text or for
the run an action asked for, and an episode started straight in the store (not tests)."""

from __future__ import annotations

import threading


def _expect():
    from playwright.sync_api import expect

    return expect


IDLE = """() => { const app = document.querySelector('[data-testid="stApp"]');
  return !!app && app.getAttribute('data-test-script-state') === 'notRunning'; }"""
# IDLE once the page has drawn two frames (what it received before is on the page)
IDLE_DRAWN = (
    """() => new Promise((done) => requestAnimationFrame(
  () => requestAnimationFrame(() => done((%s)()))))"""
    % IDLE
)


class RunWatch:
    """The script runs a page asks Streamlit for and gets, read off their websocket: each
    rerun request the page sends (a click, a widget's new value, a fragment's tick) and each
    run that finished (not one cut short for a rerun), with the count of requests sent when it
    started. The root's `data-test-script-state` alone cannot tell: right after a click it
    still reads "notRunning" until the answer arrives, and a busy browser may draw a short
    run's "running" and "notRunning" as one change."""

    def __init__(self, page) -> None:
        self.asked = 0  # rerun requests sent
        self.answered = 0  # `asked` when the latest finished run started
        self._started = 0
        page.on("websocket", self._attach)

    def _attach(self, ws) -> None:
        ws.on("framesent", self._sent)
        ws.on("framereceived", self._received)

    def _sent(self, payload) -> None:
        from streamlit.proto.BackMsg_pb2 import BackMsg

        if isinstance(payload, bytes) and _parsed(BackMsg, payload).WhichOneof("type") == "rerun_script":
            self.asked += 1

    def _received(self, payload) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        msg = _parsed(ForwardMsg, payload) if isinstance(payload, bytes) else ForwardMsg()
        kind = msg.WhichOneof("type")
        if kind == "new_session":
            self._started = self.asked
        elif kind == "script_finished" and msg.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN:
            self.answered = self._started


def _parsed(cls, payload: bytes):
    from google.protobuf.message import DecodeError

    try:
        return cls.FromString(payload)
    except DecodeError:
        return cls()


def runs(page) -> int:
    """The rerun requests this page has sent so far (its RunWatch, set by the `page` fixture)."""
    return page.run_watch.asked


def settle(page, before: int, ask_s: float = 5.0, end_s: float = 60.0) -> None:
    """Wait for the run the last action asked for (`before` = runs(page) taken before it) to end
    and be drawn: a run that started after the request has finished, and the page is idle.
    If the action sent no request within `ask_s` it asked for no run: nothing to wait for."""
    import time

    watch = page.run_watch
    deadline = time.monotonic() + ask_s
    while watch.asked <= before:
        if time.monotonic() > deadline:
            return
        page.wait_for_timeout(20)
    deadline = time.monotonic() + end_s
    while not (watch.answered > before and page.evaluate(IDLE_DRAWN)):
        assert time.monotonic() < deadline, f"the run asked for at {page.url} did not end within {end_s:.0f} s"
        page.wait_for_timeout(20)


def until(page, check, timeout_s: float = 20.0) -> None:
    """Poll `check()` (a question about the page) until it holds or `timeout_s` passes; the
    caller asserts it afterwards, so a timeout fails there with the caller's own message."""
    import time

    deadline = time.monotonic() + timeout_s
    while not check() and time.monotonic() < deadline:
        page.wait_for_timeout(50)


def still(page, locator, moved_from: float | None = None, timeout_s: float = 20.0) -> bool:
    """Wait until `locator` has left `moved_from` (its y before a scroll, if given) and stays
    where it is over two animation frames (a scroll, smooth or not, has come to rest): True,
    or False when it has not within `timeout_s`."""
    import time

    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        y = page.evaluate(
            """(el) => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(
            () => done(el.getBoundingClientRect().top))))""",
            locator.element_handle(),
        )
        if y == last and (moved_from is None or y != moved_from):
            return True
        last = y
    return False


def key(page, k: str):
    """The element Streamlit renders for the widget/container with key `k`."""
    return page.locator(f".st-key-{k}")


def click(page, k: str, force: bool = False) -> None:
    """`force`: for a button redrawn at each tick of a running job (skip the check that it
    stays put, which a page redrawn every second on a busy machine may never pass)."""
    key(page, k).locator("button").first.click(force=force)


def rerun_by(page, action) -> None:
    """Do `action()` (one that reruns the script) and wait for that run to end."""
    before = runs(page)
    action()
    settle(page, before)


def fill(page, k: str, text: str) -> None:
    """Type into a text input or text area and apply it (Enter / Ctrl+Enter)."""
    box = key(page, k).locator("input, textarea").first
    box.fill(text)
    enter = "Control+Enter" if box.evaluate("e => e.tagName") == "TEXTAREA" else "Enter"
    rerun_by(page, lambda: box.press(enter))


def see(page, text: str, timeout: float = 30_000, exact: bool = True) -> None:
    _expect()(page.get_by_text(text, exact=exact).first).to_be_visible(timeout=timeout)


def _episode(db, llm, *, env="alfworld", **config):
    from agent.engine import Engine
    from envs.registry import family
    from sessions.store import Store
    from trajectory.records import AgentConfig

    store = Store(db)
    eng = Engine(store)
    task = family(env).list_tasks()[0]
    ep, v = eng.start_episode(
        task,
        AgentConfig(model="scripted-model", base_url=llm.base_url, **config),
        {"wording": "paper"} if env == "alfworld" else {},
    )
    return store, eng, ep, v


class HeldAnswer:
    """A responder whose answer the test lets go (`release()`), instead of a fixed delay: a
    click can land while the call is in flight however slow the machine is, and the test
    waits for the answer itself (`answered`), not for a guess at when it came."""

    def __init__(self, text: str = " look", hold_s: float = 60.0):
        self.text, self.hold_s = text, hold_s
        self._go = threading.Event()
        self.called = threading.Event()  # a call is held at the model
        self.answered = threading.Event()

    def __call__(self, body: dict):
        from tests.scripted_server import Reply

        self.called.set()
        self._go.wait(self.hold_s)
        self.called.clear()
        self._go.clear()  # the next call is held again
        self.answered.set()
        return Reply(text=self.text)

    def wait_called(self, timeout: float = 30.0) -> None:
        assert self.called.wait(timeout), "the model was not called"

    def release(self, timeout: float = 30.0) -> None:
        """Let the call in flight answer, and wait until it has."""
        self.answered.clear()
        self._go.set()
        assert self.answered.wait(timeout), "the model was not called"


def at_rest(page, read, rest_s: float = 0.5, timeout_s: float = 20.0):
    """`read()` once it has returned the same value for `rest_s` (a layout that has settled,
    however slowly the machine draws; not a fixed pause that a loaded machine outlasts)."""
    import time

    deadline = time.monotonic() + timeout_s
    last, since = read(), time.monotonic()
    while time.monotonic() < deadline:
        page.wait_for_timeout(50)
        now = read()
        if now != last or now is None:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= rest_s:
            break
    return last
