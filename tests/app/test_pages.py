"""The Streamlit app through streamlit.testing.v1.AppTest: every page and every action, on the
toy environments (tests/toy_envs.py) with the scripted model server as the model."""

from __future__ import annotations

from sessions import jobs
from tests.app_helpers import EVIL, WIN, _open_edit, _won, box, cfg, click, markdownish, ok, opened, texts, version_box
from tests.scripted_server import Reply
from tests.toy_envs import ROOM_TASK, WIKI_TASK

# ---------------------------------------------------------------------- episodes / settings


def test_no_model_banner_and_pages_open_without_a_model(app):
    toy, make = app
    at = make()
    assert any(
        "No model configured" in i.value and "OPENAI_API_KEY" in i.value and "OPENAI_BASE_URL" in i.value
        for i in at.info
    )
    for page in ("editor", "versions", "compare", "settings"):
        make(page)


def test_start_episode_from_the_builtin_set_opens_it_in_the_editor(app):
    toy, make = app
    from sessions import exemplar_sets

    exemplar_sets.create_set(toy.store, "my-fixes", "alfworld")
    exemplar_sets.create_set(toy.store, "wiki-set", "hotpotqa")
    at = make()
    at.selectbox(key="new_env").set_value("alfworld").run()
    builtin = "(built-in: played by a scripted policy, not the paper's)"  # says what the built-in exemplars are
    assert at.selectbox(key="new_exemplars_alfworld").options == [builtin, "my-fixes"]
    at.selectbox(key="new_exemplars_alfworld").set_value("my-fixes")
    at.text_input(key="new_base_url").set_value(toy.llm.base_url)
    at.text_input(key="new_model").set_value("scripted-model")
    at.number_input(key="new_max_steps").set_value(12)
    at.text_input(key="new_name").set_value("my first")
    ok(at.run())
    assert ROOM_TASK.text in texts(at)
    click(at, "new_start")
    (ep,) = toy.store.episodes.list()
    e = toy.store.episodes.get(ep["episode"])
    assert e.task.id == ROOM_TASK.id and e.name == "my first"
    assert e.config.base_url == toy.llm.base_url and e.config.max_steps == 12 and e.env_options == {"wording": "paper"}
    assert e.config.exemplar_set == "my-fixes"
    assert [t.value for t in at.title] == ["Editor"]
    assert at.query_params["episode"] == str(e.id)
    # no banner: this episode has a model
    assert not any("No model configured" in i.value for i in at.info)


def test_custom_question_episode_and_bad_input_error(app):
    toy, make = app
    at = make()
    at.selectbox(key="new_env").set_value("hotpotqa").run()
    at.radio(key="new_how").set_value("Custom").run()
    at.text_input(key="new_base_url").set_value("not a url at all")
    click(at, "new_start")  # the toy family has no custom_task -> a one-line error, nothing written
    assert "hotpotqa has no custom tasks" in texts(at)
    assert toy.store.episodes.list() == []


def test_episode_list_filters_and_open(app):
    toy, make = app
    toy.llm.push(*WIN)
    ep1, v1 = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm), name="won")
    toy.engine.run(v1.id)
    ep2, v2 = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    at = make()
    df = at.dataframe[0].value
    assert sorted(df["episode"]) == [ep1.id, ep2.id]
    at.selectbox(key="f_outcome").set_value("success")
    ok(at.run())
    assert list(at.dataframe[0].value["episode"]) == [ep1.id]
    at.selectbox(key="f_outcome").set_value("all")
    at.selectbox(key="f_env").set_value("hotpotqa")
    ok(at.run())
    assert list(at.dataframe[0].value["episode"]) == [ep2.id]
    at.selectbox(key="open_pick").set_value(ep2.id)
    click(at, "open_btn")
    assert [t.value for t in at.title] == ["Editor"] and WIKI_TASK.text in texts(at)


def test_settings_save_defaults_never_a_key_and_clear_cache(app, monkeypatch):
    toy, make = app
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value-123")
    at = make("settings")
    assert "OPENAI_API_KEY: set" in texts(at)
    assert not any("sk-secret-value-123" in t for t in texts(at) + markdownish(at))
    at.text_input(key="set_base_url").set_value("ftp://nope")
    click(at, "set_save")
    assert any("must start with http" in t for t in texts(at))
    assert toy.store.settings.get("model_defaults") is None
    at.text_input(key="set_base_url").set_value(toy.llm.base_url)
    at.text_input(key="set_model").set_value("local-llama")
    at.selectbox(key="set_api_style").set_value("chat")
    click(at, "set_save")
    saved = toy.store.settings.get("model_defaults")
    assert saved["base_url"] == toy.llm.base_url and saved["model"] == "local-llama" and saved["api_style"] == "chat"
    assert "sk-secret" not in toy.db.read_bytes().decode("latin-1")
    assert f"In use: {toy.db}" in texts(at)
    # the new defaults fill the new-episode form
    at2 = make()
    assert at2.text_input(key="new_model").value == "local-llama"
    assert at2.text_input(key="new_base_url").value == toy.llm.base_url
    toy.llm.push(*WIN)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.run(v.id)
    click(at, "cache_clear")
    assert "Cleared 6 cached response(s); the calls stay in the history." in texts(at)
    # the same prompt now goes to the model again instead of the cache
    toy.llm.push(" think: a different first thought")
    b = toy.engine.editor.branch(v.id, 0)
    toy.engine.step(b.id)
    assert toy.store.versions.steps(b.id)[0].thought == "a different first thought"


# ---------------------------------------------------------------------- editor: stepping


def test_step_run_to_end_with_visible_progress(app):
    toy, make = app
    ep, v, at = opened(toy, make, *WIN)
    click(at, "btn_step")
    assert "Act 1: think: I need a mug; it may be in the cabinet." in texts(at) and "Obs 1: OK." in texts(at)
    assert any(c.value == "Step 1 · model" for c in at.caption)
    at.toggle(key="show_prompt").set_value(True)
    ok(at.run())
    (code,) = at.code
    assert code.value == toy.engine.prompts.prompt(v.id) and code.value.endswith("\nOK.\n>")
    at.toggle(key="show_prompt").set_value(False)
    click(at, "btn_run_end")  # the run starts; each rerun advances one step
    assert at.session_state["run"]["added"] == 1
    assert any(c.value == f"v{v.id}: 2 steps · running · 1 added by this run" for c in at.caption)
    for _ in range(10):
        if not at.session_state["run"]:
            break
        ok(at.run())
    assert at.session_state["run"] is None
    assert toy.store.versions.get(v.id).outcome.success is True
    assert len(toy.store.versions.steps(v.id)) == 6
    assert any("Done: success" in s.value for s in at.success)


def test_run_n_and_stop_mid_run(app):
    toy, make = app
    toy.llm.push(*WIN)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    at = make("editor", episode=ep.id)
    at.number_input(key="run_n").set_value(5)
    click(at, "btn_run_n")
    ok(at.run())
    assert len(toy.store.versions.steps(v.id)) == 2 and at.session_state["run"]["added"] == 2
    click(at, "btn_stop")
    assert at.session_state["run"] is None
    for _ in range(3):
        ok(at.run())
    assert len(toy.store.versions.steps(v.id)) == 2  # nothing ran after Stop
    assert jobs.version_states(toy.store, [v.id]) == {v.id: "stopped"}  # its run's job says so
    assert any(c.value.startswith(f"v{v.id}: 2 steps · stopped") for c in at.caption)
    assert toy.llm.pending == 4
    # Run N stops by itself after N steps
    at.number_input(key="run_n").set_value(2)
    click(at, "btn_run_n")
    for _ in range(5):
        ok(at.run())
    assert len(toy.store.versions.steps(v.id)) == 4 and at.session_state["run"] is None


def test_model_error_is_inline_with_retry_and_nothing_is_lost(app):
    toy, make = app
    toy.llm.push(WIN[0], Reply(status=500, message="backend exploded <b>x</b>"))
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, max_retries=0))
    at = make("editor", episode=ep.id)
    click(at, "btn_step")
    click(at, "btn_run_end")
    assert at.session_state["run"] is None
    assert any("nothing was lost" in e.value for e in at.error)
    err = [t for t in texts(at) if "model call failed" in t]
    assert err and "<b>x</b>" in err[0]  # shown as plain text
    assert "Act 1: think: I need a mug; it may be in the cabinet." in texts(at)
    assert len(toy.store.versions.steps(v.id)) == 1
    assert any(c.error for c in toy.store.calls.of_episode(ep.id))  # the failed call is recorded
    toy.llm.push(WIN[1])
    click(at, "retry_step")  # Retry resumes the run
    for _ in range(3):
        ok(at.run())
    assert len(toy.store.versions.steps(v.id)) == 2
    assert "Act 2: go to cabinet 1" in texts(at)


def test_untrusted_text_is_never_interpreted(app):
    toy, make = app
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm), name=EVIL)
    toy.store.versions.update(v.id, name=EVIL)
    toy.engine.human_step(v.id, action=f"go to {EVIL}")
    toy.engine.human_step(v.id, thought=f"it said {EVIL}")
    obs = toy.store.versions.steps(v.id)[0].observation
    assert EVIL in obs
    at = make("editor", episode=ep.id)
    assert f"Obs 1: {obs}" in texts(at)  # a text element holds the raw string
    assert f"Act 2: think: it said {EVIL}" in texts(at)
    assert not any("<script" in m or "evil" in m or "onerror" in m for m in markdownish(at))
    # Compare: escaped HTML only
    new = toy.engine.editor.edit(v.id, 2, "rewrite_thought", "plain now", keep_rest=False)
    cmp = make("compare", episode=ep.id, left=v.id, right=new.id)
    (h,) = cmp.get("html")
    body = h.proto.body
    assert "<script" not in body and "<img" not in body and "<a " not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "[link](http://evil)" in body
    assert not any("evil" in m or "<script" in m for m in markdownish(cmp))
    vers = make("versions", episode=ep.id)
    assert not any("evil" in m or "<script" in m for m in markdownish(vers))
    assert any(EVIL in t for t in texts(vers))  # the episode name, as text


def test_deep_link_opens_that_version(app):
    toy, make = app
    ep, v = _won(toy)
    b = toy.engine.editor.branch(v.id, 2)
    at = make("editor", episode=ep.id, version=v.id)
    assert version_box(at).value == v.id
    assert "Act 6: put mug 1 in/on table 1" in texts(at)
    at2 = make("editor", episode=ep.id, version=b.id)
    assert "Act 3: open cabinet 1" not in texts(at2) and "Act 2: go to cabinet 1" in texts(at2)
    # a link to the default page forwards to the Editor
    at3 = make(None, episode=ep.id, version=b.id)
    assert [t.value for t in at3.title] == ["Editor"]
    # switching the version in the selector updates the URL
    version_box(at).set_value(b.id)
    ok(at.run())
    assert at.query_params["version"] == str(b.id)


# ---------------------------------------------------------------------- versions / compare


def test_versions_page_tree_tokens_name_and_current(app):
    toy, make = app
    ep, v = _won(toy)
    e = toy.engine.editor.edit(v.id, 1, "rewrite_thought", 'Say "hi"', keep_rest=True)
    toy.store.settings.set("model_prices", {"scripted-model": {"prompt": 1000.0, "completion": 2000.0}})
    at = make("versions", episode=ep.id)
    (g,) = at.get("graphviz_chart")
    assert (
        "v1 -> v2" in g.proto.spec.replace(str(v.id), "1").replace(str(e.id), "2")
        or f"v{v.id} -> v{e.id}" in g.proto.spec
    )
    df = at.dataframe[0].value
    row = df[df["id"] == v.id].iloc[0]
    calls = toy.store.calls.of_episode(ep.id)
    assert row["prompt tokens"] == sum(c.usage.prompt_tokens or 0 for c in calls) > 0
    assert row["cost"] == f"${(row['prompt tokens'] * 1000 + row['completion tokens'] * 2000) / 1e6:.4f}"
    assert df[df["id"] == e.id].iloc[0]["edits"] == 1
    assert df[df["id"] == e.id].iloc[0]["current"] == "★"
    box(at, "Version").set_value(v.id).run()
    at.text_input(key=f"ver_name_{v.id}").set_value("hallucinated")
    click(at, "ver_rename")
    assert toy.store.versions.get(v.id).name == "hallucinated"
    click(at, "ver_current")
    assert toy.store.episodes.get(ep.id).current_version == v.id
    assert "hallucinated" in at.get("graphviz_chart")[0].proto.spec
    click(at, "ver_open")
    assert [t.value for t in at.title] == ["Editor"] and at.query_params["version"] == str(v.id)


def test_compare_page_word_diff_and_outcomes(app):
    toy, make = app
    bad = [" think: Now I find a mug (1). I also see a lettuce."] + [" go to shelf 1"] * 5
    toy.llm.push(*bad)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, max_steps=6))
    toy.engine.run(v.id)
    assert toy.store.versions.get(v.id).outcome.success is False
    new = toy.engine.editor.edit(v.id, 1, "rewrite_thought", "Now I find a mug (1).", keep_rest=False)
    toy.llm.push(*WIN[1:])
    toy.engine.run(new.id)
    assert toy.store.versions.get(new.id).outcome.success is True
    at = make("versions", episode=ep.id, version=new.id)
    click(at, "ver_compare")  # Compare with its parent
    assert [t.value for t in at.title] == ["Compare"]
    body = at.get("html")[0].proto.body
    assert '<del class="rd-del"> I also see a lettuce.</del>' in body
    assert 'rd-failure">failure<' in body and 'rd-success">success<' in body and 'class="rd-edited"' in body
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[f"v{v.id}"] == "failure" and metrics[f"v{new.id}"] == "success"
    assert metrics["Steps edited by a person"] == "1" and metrics["Steps that differ"] == "6"
    # (AppTest reruns the page it was opened on; open Compare itself to go on)
    at = make("compare", episode=ep.id, left=v.id, right=new.id)
    assert at.get("html")[0].proto.body.count("<tr class=") == 6
    # swap sides through the selectors
    box(at, "Left").set_value(new.id)
    box(at, "Right").set_value(v.id)
    ok(at.run())
    assert at.query_params["left"] == str(new.id) and at.query_params["right"] == str(v.id)
    assert '<ins class="rd-ins"> I also see a lettuce.</ins>' in at.get("html")[0].proto.body
    # a thought edit that kept the later steps: only the edited step differs
    kept = toy.engine.editor.edit(v.id, 1, "rewrite_thought", "I need a mug.", keep_rest=True)
    at2 = make("compare", episode=ep.id, left=v.id, right=kept.id)
    assert at2.get("html")[0].proto.body.count("<tr class=") == 6
    at2.toggle(key="cmp_only_changes").set_value(True)
    ok(at2.run())
    assert at2.get("html")[0].proto.body.count("<tr class=") == 1


def test_annotations_from_versions_and_editor_pages(app):
    from sessions import annotations

    toy, make = app
    ep, v = _won(toy)
    at = make("versions", episode=ep.id)
    at.selectbox(key=f"ver-verdict-{v.id}").set_value("failure")
    at.multiselect(key=f"ver-modes-{v.id}").set_value(["hallucination"])
    at.checkbox(key=f"ver-ready-{v.id}").check()
    at.text_input(key=f"ver-by-{v.id}").set_value("ann-a")
    ok(at.button[[b.label for b in at.button].index("Save annotation")].click().run())
    a = annotations.version_annotation(toy.store, v.id)
    assert (a.verdict, a.failure_modes, a.exemplar_ready, a.annotator) == ("failure", ["hallucination"], True, "ann-a")
    ed = make("editor", episode=ep.id)
    _open_edit(ed, v.id, 1)
    step = toy.store.versions.steps(v.id)[0]
    ed.multiselect(key=f"ed-tags-{step.id}").set_value(["hallucinated"])
    ed.text_input(key=f"ed-note-{step.id}").set_value("<b>not</b> in the fridge")
    ok(ed.button[[b.label for b in ed.button].index("Save tags")].click().run())
    t = annotations.step_annotation(toy.store, step.id)
    assert t.tags == ["hallucinated"] and t.note == "<b>not</b> in the fridge"
