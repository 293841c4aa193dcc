"""Who may see the app. Episodes, the model key in the environment and the database are one
person's: on loopback the app is theirs; beyond it, a person must present REACT_EDITOR_TOKEN
(compared in constant time) or sign in with Streamlit's OIDC login ([auth] in
.streamlit/secrets.toml) before any page shows. With neither, nothing is served."""

from __future__ import annotations

import hmac
import ipaddress
import os

import streamlit as st

TOKEN_ENV = "REACT_EDITOR_TOKEN"
_PASSED = "_access_token_ok"


def is_loopback(address: str | None) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address or "").is_loopback
    except ValueError:
        return False


def oidc_configured() -> bool:
    """Streamlit's OIDC login is set up (an [auth] section in the app's secrets)."""
    try:
        return "auth" in st.secrets
    except Exception:  # no secrets file at all
        return False


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


def gate() -> None:
    """Show a page only to someone allowed to see it; otherwise say why and stop the run."""
    address = st.get_option("server.address")
    token = os.environ.get(TOKEN_ENV) or ""
    if oidc_configured():
        if not st.user.is_logged_in:
            st.title("Sign in")
            if st.button("Log in", key="access_login"):
                st.login()
            st.stop()
        return
    if token:
        _token_prompt(token)
        return
    if not is_loopback(address):
        st.error("Refusing to serve on this address: anyone on the network could read and change your episodes. "
                 "Start the app with `react-editor app` (it listens on 127.0.0.1), or set REACT_EDITOR_TOKEN "
                 "(or Streamlit's OIDC login) to serve it beyond this machine.")
        st.text(f"address: {address or 'all interfaces'}")
        st.stop()


def _token_prompt(token: str) -> None:
    if st.session_state.get(_PASSED):
        return
    st.title("Access token")
    with st.form("access_form"):
        given = st.text_input("Token (REACT_EDITOR_TOKEN of the person running the app)", type="password",
                              key="access_token")
        sent = st.form_submit_button("Open")
    if sent:
        if hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8")):
            st.session_state[_PASSED] = True
            st.rerun()
        st.error("That token is not right.")
    st.stop()
