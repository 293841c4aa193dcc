"""Who may reach the app, as plain functions the launcher (`react-editor app`), the server
(app_server.py) and the page gate (`app_pages/access.py`) share: the access token,
the loopback test, the Host names a request may carry, and the OIDC allow-list.

Threat model: the app holds one person's episodes, database and model key. Other local users,
port-forwards and reverse proxies reach 127.0.0.1, so every request presents the token that
`react-editor app` makes at each start (in the URL it prints, then as a cookie); a web page
can resolve its own name to 127.0.0.1 (DNS rebinding), so a request whose Host is not a
loopback name or the configured address is refused."""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOKEN_ENV = "REACT_EDITOR_TOKEN"  # the token the server checks (set by the launcher, or by you beyond loopback)
TOKEN_PARAM = "token"  # the query parameter of the URL the launcher prints
ENDPOINTS_ENV = "REACT_EDITOR_ALLOWED_ENDPOINTS"  # --allow-endpoint URLs, one a line: they may get the launch key
ALLOW_LIST = "access"  # the secrets table of the OIDC allow-list: allowed_emails, allowed_domains
WILDCARDS = ("", "0.0.0.0", "::")  # addresses that bind every interface
LOOPBACK = "127.0.0.1"  # where the app listens unless told otherwise


def new_token() -> str:
    return secrets.token_urlsafe(32)


def same_token(given: str | None, token: str) -> bool:
    """Constant-time comparison; an empty token (or anything not text) never matches."""
    if not isinstance(given, str) or not isinstance(token, str) or not given or not token:
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), token.encode("utf-8", "surrogatepass"))


def cookie_name(port: int | str) -> str:
    """One cookie per port: cookies ignore ports, two apps on one machine must not mix."""
    return f"react_editor_token_{port}"


def is_loopback(address: str | None) -> bool:
    """127.x, ::1 or `localhost` (the one name that always means this machine)."""
    if not address:
        return False
    name = address.strip().strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_allowed(host: str | None, address: str | None) -> bool:
    """Whether a request's Host header (name[:port]) may reach an app bound to `address`:
    loopback names, the configured address, and, when bound to every interface, any IP
    literal (a rebinding page always sends its own DNS name, never an IP)."""
    if not host:
        return False
    name = _host_name(host)
    if name is None:
        return False
    if is_loopback(name):
        return True
    bound = (address or "").strip().strip("[]").lower()
    if bound and name == bound.rstrip("."):
        return True
    if bound in WILDCARDS:
        try:
            ipaddress.ip_address(name)
            return True
        except ValueError:
            return False
    return False


def _host_name(host: str) -> str | None:
    """The name part of a Host header, lowercased, or None when it is malformed."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        if end < 0 or (host[end + 1 :] and not host[end + 1 :].startswith(":")):
            return None
        return host[1:end]
    name, _, port = host.partition(":")
    if port and not port.isdigit():
        return None
    return name.rstrip(".") or None


def allow_list(table: Mapping[str, Any] | None) -> tuple[frozenset[str], frozenset[str]]:
    """(e-mails, domains) of the `[access]` secrets table, lowercased; either may be empty."""
    table = table or {}

    def words(key: str) -> frozenset[str]:
        value = table.get(key) or []
        if isinstance(value, str):
            value = [value]
        return frozenset(str(v).strip().lower().lstrip("@") for v in value if str(v).strip())

    return words("allowed_emails"), words("allowed_domains")


def email_allowed(email: str | None, emails: Iterable[str], domains: Iterable[str], verified: Any = True) -> bool:
    """A signed-in person is let in when their (verified) e-mail is listed or its domain is."""
    if not email or verified is False or str(verified).lower() == "false":
        return False
    email = email.strip().lower()
    local, at, domain = email.rpartition("@")
    if not at or not local:
        return False
    return email in set(emails) or domain in set(domains)


# -- the server side: ASGI middleware in front of Streamlit (app_server.py) ------------------
OPEN_PATHS = ("/_stcore/health",)  # "ok" and nothing else: a launcher polls it without the token (Streamlit
# answers any other path, `/healthz` too, with its index page: those need the token)
_SERVED = {"gated": False}  # set when the middleware is in front of this process's app


def behind_gate() -> bool:
    """Whether this process serves the app through `Gate` (`react-editor app`)."""
    return _SERVED["gated"]


class Gate:
    """Refuses, before Streamlit sees it, any HTTP request or websocket whose Host (or
    Origin) is not a loopback name or the configured address, and, when a token is set,
    any without it: the URL's `?token=` sets a same-site cookie the later requests carry."""

    def __init__(self, app, *, address: str | Callable[[], str] = LOOPBACK, token: str | None = None):
        self.app = app
        self.token = os.environ.get(TOKEN_ENV, "") if token is None else token
        self._address = address
        _SERVED["gated"] = True

    def address(self) -> str:
        """The configured address (a callable is asked once, at the first request)."""
        if callable(self._address):
            self._address = str(self._address() or "")
        return self._address

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        origin = headers.get("origin")
        # an Origin of `null` (a sandboxed iframe, a file: or data: page) is no page of the app's
        if not host_allowed(headers.get("host"), self.address()) or (
            origin is not None and not host_allowed(urlsplit(origin).netloc, self.address())
        ):
            return await _refuse(scope, send, "unknown host: open the app at 127.0.0.1")
        if not self.token or scope["path"] in OPEN_PATHS:
            return await self.app(scope, receive, send)
        port = (scope.get("server") or ("", 0))[1]
        cookies = "; ".join(v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == b"cookie")
        if any(same_token(v, self.token) for v in cookie_values(cookies, cookie_name(port))):
            return await self.app(scope, receive, send)
        given = parse_qs(scope.get("query_string", b"").decode("latin-1")).get(TOKEN_PARAM, [""])[-1]
        if scope["type"] == "http" and same_token(given, self.token):
            return await self.app(scope, receive, _with_cookie(send, cookie_name(port), self.token))
        return await _refuse(scope, send, "open the address `react-editor app` printed: it carries the access token")


def cookie_values(header: str, name: str) -> list[str]:
    """Every value a Cookie header gives `name`, each `name=value` pair read on its own: a
    malformed pair of another app's (`a="`, which stops a full cookie parser) must not hide
    the token, and a second pair of the same name (set by another app on 127.0.0.1: cookies
    ignore ports) must not shadow it."""
    out = []
    for pair in header.split(";"):
        key, eq, value = pair.partition("=")
        if eq and key.strip() == name:
            value = value.strip()
            out.append(value[1:-1] if len(value) > 1 and value[0] == value[-1] == '"' else value)
    return out


def _with_cookie(send, name: str, token: str):
    """`send` that adds the token cookie to the response: HttpOnly (no script reads it),
    SameSite=Lax (a cross-site page's requests and websockets do not carry it)."""
    value = f"{name}={token}; Path=/; HttpOnly; SameSite=Lax".encode("latin-1")

    async def wrapped(message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", value)]}
        await send(message)

    return wrapped


async def _refuse(scope, send, why: str) -> None:
    """403 with one line; a websocket is closed before it is accepted (the server answers 403)."""
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    body = f"Forbidden: {why}\n".encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
