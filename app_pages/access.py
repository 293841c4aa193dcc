"""Who may see the app. Episodes, the model key in the environment and the database are one
person's. `react-editor app` serves app.py behind `agent.gate.Gate` (foreign Host
names and requests without the access token never reach Streamlit); here, before any page
shows: a browser session is refused unless it came through that gate; with a token
(REACT_EDITOR_TOKEN) the session presents it (cookie, `?token=` or the form, compared in
constant time); with Streamlit's OIDC login ([auth] in .streamlit/secrets.toml) a person
signs in and must be on the allow-list ([access] allowed_emails / allowed_domains)."""

from __future__ import annotations

import os

import streamlit as st

from agent.gate import (
    ALLOW_LIST,
    TOKEN_ENV,
    TOKEN_PARAM,
    allow_list,
    behind_gate,
    cookie_name,
    email_allowed,
    is_loopback,
    same_token,
)

_PASSED = "_access_token_ok"


def oidc_configured() -> bool:
    """Streamlit's OIDC login is set up (an [auth] section in the app's secrets)."""
    try:
        return "auth" in st.secrets
    except Exception:  # no secrets file at all
        return False


def _allowed() -> tuple[frozenset[str], frozenset[str]]:
    try:
        return allow_list(st.secrets.get(ALLOW_LIST))
    except Exception:  # no secrets file at all
        return frozenset(), frozenset()


def signed_in_name() -> str | None:
    """The signed-in person's name (or e-mail) under OIDC login, else None."""
    if not oidc_configured():
        return None
    try:
        if not st.user.is_logged_in:
            return None
        return str(st.user.get("name") or st.user.get("email") or "") or None
    except Exception:
        return None


def _refuse(title: str, why: str) -> None:
    st.title(title)
    st.error(why)
    st.stop()


def gate() -> None:
    """Show a page only to someone allowed to see it; otherwise say why and stop the run."""
    address = st.get_option("server.address")
    token = os.environ.get(TOKEN_ENV) or ""
    if not behind_gate() and st.context.headers:  # a browser, but not through `react-editor app`
        st.error("Start the app with `react-editor app`: it checks the access token and the Host name.")
        st.stop()
    if not token and not is_loopback(address):
        st.error(
            "Refusing to serve on this address: anyone on the network could read and change your episodes. "
            "Start the app with `react-editor app` (it listens on 127.0.0.1 and makes an access token)."
        )
        st.text(f"address: {address or 'all interfaces'}")
        st.stop()
    if token:
        _token_prompt(token)
    if oidc_configured():
        _oidc()


def _oidc() -> None:
    emails, domains = _allowed()
    if not emails and not domains:
        _refuse(
            "Sign-in is not set up",
            "OIDC sign-in needs an allow-list: add [access] allowed_emails = [...] "
            "and/or allowed_domains = [...] to .streamlit/secrets.toml.",
        )
    if not st.user.is_logged_in:
        st.title("Sign in")
        if st.button("Log in", key="access_login"):
            st.login()
        st.stop()
    if not email_allowed(st.user.get("email"), emails, domains, st.user.get("email_verified", True)):
        st.title("Not on the list")
        st.error("This account may not open this app; ask the person running it.")
        st.text(f"Signed in as: {st.user.get('email') or '(no e-mail)'}")  # the provider's text: never markdown
        if st.button("Log out", key="access_logout"):
            st.logout()
        st.stop()


def _token_prompt(token: str) -> None:
    if st.session_state.get(_PASSED):
        return
    port = st.get_option("server.port")
    if same_token(st.context.cookies.get(cookie_name(port)), token) or same_token(
        st.query_params.get(TOKEN_PARAM), token
    ):
        st.session_state[_PASSED] = True
        return
    st.title("Access token")
    with st.form("access_form"):
        given = st.text_input(
            "Token (in the URL `react-editor app` printed, after ?token=)", type="password", key="access_token"
        )
        sent = st.form_submit_button("Open")
    if sent:
        if same_token(given, token):
            st.session_state[_PASSED] = True
            st.rerun()
        st.error("That token is not right.")
    st.stop()


def key_guard():
    """The process's endpoint-key guard (agent.endpoint_keys): installed once when the app is
    served by `react-editor app`; whatever is installed otherwise (None in AppTest)."""
    from agent import client

    if behind_gate() and client.ENDPOINT_KEYS is None:
        from agent.endpoint_keys import CONFIRMED_SETTING, EndpointKeys
        from agent.gate import ENDPOINTS_ENV
        from app_pages import app_engine

        store = app_engine.store()
        client.ENDPOINT_KEYS = EndpointKeys(
            os.environ.get("OPENAI_API_KEY"),
            os.environ.get("OPENAI_BASE_URL") or client.DEFAULT_BASE_URL,
            [u for u in os.environ.get(ENDPOINTS_ENV, "").splitlines() if u.strip()],
            confirmed=lambda: store.settings.get(CONFIRMED_SETTING, []) or [],
        )
    return client.ENDPOINT_KEYS


def endpoint_keys() -> None:
    """In the sidebar: a key for each endpoint that was sent none because the launch key may
    not go there (typed here, it goes to that endpoint alone and is never stored)."""
    guard = key_guard()
    if guard is None:
        return
    for i, endpoint in enumerate(guard.waiting()[-3:]):
        with st.sidebar.form(f"endpoint_key_{i}"):
            st.text(
                f"{endpoint} got no key: OPENAI_API_KEY goes only to the launch endpoint and to those "
                "`react-editor app --allow-endpoint` or `react-editor confirm` allowed."
            )
            key = st.text_input(
                "A key for this endpoint alone (kept until the app stops, never stored)",
                type="password",
                key=f"endpoint_key_value_{i}",
            )
            if st.form_submit_button("Use this key") and key.strip():
                guard.give(endpoint, key.strip())
                st.rerun()
