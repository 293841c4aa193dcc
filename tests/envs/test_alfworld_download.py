"""`download_official` against a local HTTP server laid out like the alfworld release."""

from __future__ import annotations

import http.server
import json
import threading
import zipfile
from pathlib import Path

import pytest

from envs.base import EnvError


@pytest.fixture
def release(tmp_path):
    root = tmp_path / "www"
    names = {
        "0.2.2/json_2.1.1_json.zip": "traj_data.json",
        "0.2.2/json_2.1.1_pddl.zip": "initial_state.pddl",
        "0.4.0/json_2.1.2_tw-pddl.zip": "game.tw-pddl",
    }
    for rel, fname in names.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(p, "w") as zf:
            zf.writestr(
                f"json_2.1.1/valid_unseen/pick_and_place_simple-Apple-None-Fridge-1/trial_T1/{fname}",
                json.dumps({"file": fname}),
            )
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(root), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_download_and_unpack(release, tmp_path):
    from envs.alfworld.download import download_official

    msgs = []
    out = download_official(tmp_path / "data", progress=msgs.append, base_url=release)
    trial = out / "valid_unseen" / "pick_and_place_simple-Apple-None-Fridge-1" / "trial_T1"
    assert {p.name for p in trial.iterdir()} == {"traj_data.json", "initial_state.pddl", "game.tw-pddl"}
    assert (tmp_path / "data" / "logic" / "alfred.twl2").exists()
    assert sum("unpacked" in m for m in msgs) == 3


def test_download_error_is_clear(release, tmp_path):
    from envs.alfworld.download import download_official

    with pytest.raises(EnvError, match="HTTP 404"):
        download_official(tmp_path / "d", progress=lambda m: None, base_url=release + "/missing")
    _ = Path
