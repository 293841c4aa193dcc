"""Playwright helpers the browser tests share: widgets by key, typing, waiting for text or for
the run an action asked for, and an episode started straight in the store (not tests)."""

from __future__ import annotations

import threading


def _expect():
    from playwright.sync_api import expect

    return expect


# Streamlit marks the app's root with its script state (`data-test-script-state`). Right after a
# click it still reads "notRunning" until the server's answer arrives, so each page counts the
# runs it has seen start (this script, added to every test's context) and `settle` waits for one
# more than before the action to start, then for the app to be idle again.
RUN_COUNTER = """(() => {
  if (window.__stRuns !== undefined) return;
  window.__stRuns = 0;
  const attr = 'data-test-script-state';
  new MutationObserver((records) => records.forEach((m, i) => {
    const next = records[i + 1];
    const now = next && next.target === m.target ? next.oldValue : m.target.getAttribute(attr);
    if (now === 'running' && m.oldValue !== 'running') window.__stRuns += 1;
  })).observe(document, {subtree: true, attributes: true, attributeOldValue: true, attributeFilter: [attr]});
})();"""
IDLE = """() => { const app = document.querySelector('[data-testid="stApp"]');
  return !!app && app.getAttribute('data-test-script-state') === 'notRunning'; }"""
MISSED: list[str] = []  # actions after which no run was seen to start (see settle)


def runs(page) -> int:
    """How many script runs this page has seen start (RUN_COUNTER)."""
    return page.evaluate("window.__stRuns || 0")


def settle(page, before: int, start_ms: float = 10_000, end_ms: float = 60_000) -> None:
    """Wait for the run the last action asked for (`before` = runs(page) taken before it): a run
    seen to start, then the app idle. An action that asked for none costs `start_ms`: use it
    only after ones that rerun the script (a widget's new value, a button)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function("n => (window.__stRuns || 0) > n", arg=before, timeout=start_ms, polling=50)
    except PlaywrightTimeout:
        MISSED.append(page.url)
        import sys; print(f"\nSETTLE MISSED {page.url}", file=sys.stderr)  # DEBUG
    page.wait_for_function(IDLE, timeout=end_ms, polling=50)


def until(page, check, timeout_s: float = 20.0) -> None:
    """Poll `check()` (a question about the page) until it holds or `timeout_s` passes; the
    caller asserts it afterwards, so a timeout fails there with the caller's own message."""
    import time

    deadline = time.monotonic() + timeout_s
    while not check() and time.monotonic() < deadline:
        page.wait_for_timeout(50)


def still(page, locator, moved_from: float | None = None, timeout_s: float = 20.0) -> None:
    """Wait until `locator` has left `moved_from` (its y before a scroll, if given) and stays
    where it is over two animation frames (a scroll, smooth or not, has come to rest)."""
    import time

    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        y = page.evaluate("""(el) => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(
            () => done(el.getBoundingClientRect().top))))""", locator.element_handle())
        if y == last and (moved_from is None or y != moved_from):
            return
        last = y


def key(page, k: str):
    """The element Streamlit renders for the widget/container with key `k`."""
    return page.locator(f".st-key-{k}")


def click(page, k: str) -> None:
    key(page, k).locator("button").first.click()


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
