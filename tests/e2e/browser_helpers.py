"""Playwright helpers the browser tests share: widgets by key, typing, waiting for text, and an
episode started straight in the store (not tests)."""

from __future__ import annotations

import threading


def _expect():
    from playwright.sync_api import expect

    return expect


def key(page, k: str):
    """The element Streamlit renders for the widget/container with key `k`."""
    return page.locator(f".st-key-{k}")


def click(page, k: str) -> None:
    key(page, k).locator("button").first.click()


def fill(page, k: str, text: str) -> None:
    """Type into a text input or text area and apply it (Enter / Ctrl+Enter)."""
    box = key(page, k).locator("input, textarea").first
    box.fill(text)
    box.press("Control+Enter" if box.evaluate("e => e.tagName") == "TEXTAREA" else "Enter")
    page.wait_for_timeout(300)


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
    ep, v = eng.start_episode(task, AgentConfig(model="scripted-model", base_url=llm.base_url, **config),
                              {"wording": "paper"} if env == "alfworld" else {})
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
