"""Issue 11 in the app: untrusted text in error/status boxes stays plain text (item 9),
endpoints with credentials are refused (item 8), shorter model defaults (item 18), a cut
completion is said (item 14)."""

from __future__ import annotations

import html

from tests.app_helpers import click, markdownish, texts
from tests.scripted_server import Reply

INJECT = "![x](http://evil.example/x.png) [link](http://evil.example)"
SECRET = "hunter2-pass"


def no_markdown_injection(at) -> None:
    for value in markdownish(at):
        assert "](http" not in value, value


def test_error_text_from_input_is_plain_text_on_the_export_page(app):
    toy, make = app
    at = make("export")
    at.text_input(key="set-name").set_value("s")
    at.text_input(key="set-refs").set_value(INJECT)
    at = click(at, "FormSubmitter:set-add-Add to set")
    boxes = [h.proto.body for h in at.get("html") if "re-alert" in h.proto.body]  # escaped text in the alert box
    assert any("![x](http://evil.example/x.png)" in b for b in boxes), boxes
    no_markdown_injection(at)


def test_model_name_in_the_settings_banner_is_plain_text(app):
    toy, make = app
    toy.store.settings.set("model_defaults", {"model": INJECT, "base_url": toy.llm.base_url})
    at = make("settings")
    boxes = [h.proto.body for h in at.get("html") if "re-alert" in h.proto.body]  # escaped text in the alert box
    assert any(html.escape(INJECT) in b for b in boxes), boxes
    no_markdown_injection(at)


def test_model_error_text_is_plain_text_in_the_editor(app):
    toy, make = app
    from tests.app_helpers import cfg
    from tests.toy_envs import ROOM_TASK

    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, max_retries=0))
    toy.llm.push(Reply(status=400, message=INJECT))
    at = make("editor", episode=ep.id)
    at = click(at, "btn_step")
    assert any("evil.example" in t for t in texts(at)), texts(at)
    no_markdown_injection(at)


def test_an_endpoint_with_credentials_is_refused_and_never_stored(app):
    toy, make = app
    at = make()
    at.selectbox(key="new_env").set_value("alfworld").run()
    at.text_input(key="new_base_url").set_value(f"http://alice:{SECRET}@127.0.0.1:9/v1")
    at = click(at, "new_start")
    assert any("credentials" in t for t in texts(at)), texts(at)
    assert toy.store.episodes.list() == []
    assert SECRET not in "".join(texts(at) + markdownish(at))


def test_new_episodes_from_the_app_use_shorter_model_timeouts(app):
    toy, make = app
    at = make()
    at.selectbox(key="new_env").set_value("alfworld").run()
    at.text_input(key="new_base_url").set_value(toy.llm.base_url)
    click(at, "new_start")
    (row,) = toy.store.episodes.list()
    cfg = toy.store.episodes.get(row["episode"]).config
    assert cfg.timeout_s <= 20 and cfg.max_retries <= 2


def test_a_cut_completion_is_said_in_the_editor(app):
    toy, make = app
    from tests.app_helpers import cfg
    from tests.toy_envs import ROOM_TASK

    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.llm.push(" go to " + "x" * 30_000)
    at = make("editor", episode=ep.id)
    at = click(at, "btn_step")
    assert "(the model's completion was cut to 20,000 of its 30,007 characters)" in texts(at)


def test_saved_defaults_with_credentials_are_never_shown(app):
    toy, make = app
    toy.store.settings.set("model_defaults", {"base_url": f"http://bob:{SECRET}@127.0.0.1:9/v1"})
    for page in (None, "settings"):
        at = make(page)
        shown = [w.value for w in at.text_input] + texts(at) + markdownish(at)
        assert not any(SECRET in str(v) for v in shown), shown
