"""Which model key goes to which endpoint in the app. A page visitor may type any base URL;
the launching person's OPENAI_API_KEY must not follow it there. The launch key goes to the
launch endpoint (OPENAI_BASE_URL, else the OpenAI API), to endpoints the launcher allowed
(`react-editor app --allow-endpoint URL`) and to endpoints confirmed with `react-editor
confirm`; any other endpoint gets a key typed for it alone (kept in this process's memory,
never in the database), else none. The CLI installs no guard: there, the person who types
`--base-url` is the one whose key it is."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

CONFIRMED_SETTING = "confirmed_endpoints"  # store setting: endpoints `confirm` let the launch key reach


def endpoint_id(url: str) -> str:
    """One spelling per endpoint: credentials off, no trailing slash, lowercase."""
    from agent.client import public_url

    return public_url(url).rstrip("/").lower()


class EndpointKeys:
    """The guard `agent.client.ModelClient` asks for the key of an endpoint."""

    def __init__(
        self,
        launch_key: str | None,
        launch_endpoint: str,
        allowed: Iterable[str] = (),
        confirmed: Callable[[], Iterable[str]] = lambda: (),
    ):
        self.launch_key = launch_key or ""
        self._allowed = {endpoint_id(u) for u in (launch_endpoint, *allowed) if u}
        self._confirmed = confirmed
        self._typed: dict[str, str] = {}
        self._refused: dict[str, None] = {}  # ordered set, bounded
        self._lock = threading.Lock()

    def allowed(self, url: str) -> bool:
        ep = endpoint_id(url)
        if ep in self._allowed:
            return True
        try:
            return ep in {endpoint_id(u) for u in self._confirmed() or ()}
        except Exception:  # the database is busy: not allowed this time
            return False

    def key_for(self, url: str, key: str) -> str | None:
        """The key a client for `url` may send in place of `key` (None: no key at all)."""
        ep = endpoint_id(url)
        with self._lock:
            typed = self._typed.get(ep)
        if typed:
            return typed
        if not key or key != self.launch_key or self.allowed(url):
            return key or None
        with self._lock:
            self._refused[ep] = None
            while len(self._refused) > 50:
                self._refused.pop(next(iter(self._refused)))
        return None

    def give(self, url: str, key: str) -> None:
        """A key a person typed for `url` alone."""
        with self._lock:
            self._typed[endpoint_id(url)] = key
            self._refused.pop(endpoint_id(url), None)

    def waiting(self) -> list[str]:
        """Endpoints that were sent no key because none is allowed there (newest last)."""
        with self._lock:
            return [ep for ep in self._refused if ep not in self._typed]
