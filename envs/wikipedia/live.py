"""Live backend: the MediaWiki Action API of a wiki (default English Wikipedia).

A search costs at most 3 requests: `query` (all title variants at once, redirects
resolved, disambiguation from `pageprops`), then `parse` for a hit's HTML or
`list=search` for the similar titles of a miss. Polite per Wikimedia's policy: a
descriptive User-Agent, gzip, timeouts, retries that honour `Retry-After`.
"""

from __future__ import annotations

import os
import time

import httpx

import envs.wikipedia.text
from envs.wikipedia.backend import SearchOutcome, outcome_from_html

DEFAULT_API = "https://en.wikipedia.org/w/api.php"
USER_AGENT = (
    "react-editor/0.1 (ReAct trajectory editor; https://github.com/react-editor/react-editor; "
    "research use) httpx/" + httpx.__version__
)
_RETRY_STATUS = {429, 500, 502, 503, 504}


class ApiFailure(Exception):
    """The wiki did not answer usably (HTTP error, timeout, bad JSON, API error)."""


class LiveBackend:
    def __init__(
        self,
        api_url: str = DEFAULT_API,
        timeout: float = 10.0,
        retries: int = 2,
        max_retry_after: float = 10.0,
        user_agent: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ):
        self.api_url = api_url
        self.name = f"live:{api_url}"
        self.retries = retries
        self.max_retry_after = max_retry_after
        ua = user_agent or os.environ.get("REACT_EDITOR_USER_AGENT") or USER_AGENT
        self.client = httpx.Client(
            timeout=timeout,
            headers={"User-Agent": ua, "Accept-Encoding": "gzip"},
            follow_redirects=True,
            transport=transport,
        )
        self.requests = 0  # HTTP requests sent (benchmark and tests count them)

    # -- HTTP -------------------------------------------------------------------------------
    def _get(self, params: dict) -> dict:
        params = {"format": "json", "formatversion": "2", "maxlag": "5", **params}
        last = "no answer"
        for attempt in range(self.retries + 1):
            self.requests += 1
            try:
                r = self.client.get(self.api_url, params=params)
            except httpx.TimeoutException:
                last = "timed out"
                continue
            except httpx.HTTPError as exc:
                last = f"connection error: {type(exc).__name__}"
                continue
            if r.status_code in _RETRY_STATUS:
                last = f"HTTP {r.status_code}"
                if attempt < self.retries:
                    time.sleep(self._retry_after(r, attempt))
                continue
            if r.status_code != 200:
                raise ApiFailure(f"HTTP {r.status_code}")
            try:
                data = r.json()
            except ValueError:
                last = "the wiki sent broken JSON"
                continue
            if not isinstance(data, dict):
                last = "the wiki sent unexpected JSON"
                continue
            err = data.get("error")
            if err:
                code = err.get("code", "error") if isinstance(err, dict) else "error"
                if code == "maxlag" and attempt < self.retries:
                    last = "the wiki is lagged"
                    time.sleep(self._retry_after(r, attempt))
                    continue
                info = err.get("info", "") if isinstance(err, dict) else str(err)
                raise ApiFailure(f"API error {code}: {info}"[:200])
            return data
        raise ApiFailure(last)

    def _retry_after(self, r: httpx.Response, attempt: int) -> float:
        value = r.headers.get("Retry-After")
        try:
            wait = float(value) if value is not None else 0.5 * 2**attempt
        except ValueError:
            wait = 0.5 * 2**attempt
        return max(0.0, min(wait, self.max_retry_after))

    # -- API calls ------------------------------------------------------------------------
    def _resolve(self, variants: list[str]) -> tuple[dict | None, bool]:
        """(page record, is_disambiguation) for the first variant that exists."""
        data = self._get(
            {
                "action": "query",
                "titles": "\x1f" + "\x1f".join(variants),  # \x1f separator: titles may hold '|'
                "redirects": "1",
                "prop": "pageprops",
                "ppprop": "disambiguation",
            }
        )
        q = data.get("query") or {}
        norm = {n.get("from"): n.get("to") for n in q.get("normalized") or []}
        redir = {r.get("from"): r.get("to") for r in q.get("redirects") or []}
        pages = {p.get("title"): p for p in q.get("pages") or [] if isinstance(p, dict)}
        for v in variants:
            t = norm.get(v, v)
            seen = 0
            while t in redir and seen < 10:
                t, seen = redir[t], seen + 1
            page = pages.get(t)
            if page and not page.get("missing") and not page.get("invalid") and page.get("ns", 0) == 0:
                return page, "disambiguation" in (page.get("pageprops") or {})
        return None, False

    def _html(self, page: dict) -> tuple[str, str]:
        params = {
            "action": "parse",
            "prop": "text",
            "disablelimitreport": "1",
            "disableeditsection": "1",
            "disabletoc": "1",
        }
        if page.get("pageid"):
            params["pageid"] = str(page["pageid"])
        else:
            params["page"] = page["title"]
        p = self._get(params).get("parse") or {}
        text = p.get("text")
        if isinstance(text, dict):  # formatversion=1 shape
            text = text.get("*")
        if not isinstance(text, str):
            raise ApiFailure("the wiki sent no page text")
        return p.get("title") or page["title"], text

    def similar(self, entity: str) -> list[str]:
        q = envs.wikipedia.text.search_query(entity)
        if not q:
            return []
        data = self._get(
            {
                "action": "query",
                "list": "search",
                "srsearch": q,
                "srlimit": "5",
                "srnamespace": "0",
                "srprop": "",
                "srinfo": "",
            }
        )
        hits = (data.get("query") or {}).get("search") or []
        return [h["title"] for h in hits if isinstance(h, dict) and "title" in h][:5]

    def search(self, entity: str) -> SearchOutcome:
        try:
            variants = envs.wikipedia.text.title_variants(entity)
            page, disamb = self._resolve(variants) if variants else (None, False)
            if page is None:
                return SearchOutcome("miss", similar=self.similar(entity))
            if disamb:
                return SearchOutcome("disambiguation", title=page["title"], similar=self.similar(entity))
            title, html = self._html(page)
            return outcome_from_html(title, html, lambda: self.similar(entity))
        except ApiFailure as exc:
            return SearchOutcome("error", error=str(exc))

    def close(self) -> None:
        self.client.close()
