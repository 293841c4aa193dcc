"""Issue 11 item 12: `export --out` writes regular files atomically with the umask's mode,
refuses to replace anything else (symlink, FIFO, device), writes to stdout with `-`, and
an unwritable or invalid path is a one-line error."""

from __future__ import annotations

import json
import os
import stat

import pytest

from react_editor.main import main
from tests.cli_helpers import cli


@pytest.fixture
def db(toy, capsys):
    db = str(toy.db)
    assert main(["run", "--env", "alfworld", "--task", "toy/room-1", "--db", db, "--human"]) == 0
    assert main(["step", "1", "--action", "go to cabinet 1", "--db", db]) == 0
    capsys.readouterr()
    return db


@pytest.fixture
def outdir(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    return d


def export(capsys, db, out):
    return cli(capsys, "export", "1", "--format", "jsonl", "--out", str(out), "--db", db)


def refused(code: int, err: str) -> bool:
    return code == 2 and err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_regular_file_gets_the_umask_mode(db, capsys, outdir, umask, mode):
    old = os.umask(umask)
    try:
        code, _, err = export(capsys, db, outdir / "a.jsonl")
    finally:
        os.umask(old)
    assert code == 0, err
    assert stat.S_IMODE((outdir / "a.jsonl").stat().st_mode) == mode
    assert json.loads((outdir / "a.jsonl").read_text())["episode"]["ref"] == 1
    assert [p.name for p in outdir.iterdir()] == ["a.jsonl"]  # no temp file left


def test_a_symlink_is_not_replaced(db, capsys, outdir):
    target = outdir / "precious.txt"
    target.write_text("keep me")
    link = outdir / "out.jsonl"
    link.symlink_to(target)
    code, _, err = export(capsys, db, link)
    assert refused(code, err) and "not a regular file" in err, err
    assert link.is_symlink() and target.read_text() == "keep me"
    assert sorted(p.name for p in outdir.iterdir()) == ["out.jsonl", "precious.txt"]


def test_a_fifo_is_not_replaced(db, capsys, outdir):
    fifo = outdir / "pipe"
    os.mkfifo(fifo)
    code, _, err = export(capsys, db, fifo)
    assert refused(code, err) and "not a regular file" in err, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_device_node_is_not_replaced(db, capsys, outdir):
    dev = outdir / "null"
    try:
        os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs root")
    code, _, err = export(capsys, db, dev)
    assert refused(code, err) and "not a regular file" in err, err
    assert stat.S_ISCHR(os.lstat(dev).st_mode)


def test_dash_writes_to_stdout(db, capsys):
    code, out, err = export(capsys, db, "-")
    assert code == 0, err
    assert json.loads(out.splitlines()[0])["episode"]["ref"] == 1


def test_unwritable_and_invalid_paths_are_one_line_errors(db, capsys, outdir):
    plain = outdir / "file.txt"
    plain.write_text("x")
    for bad in (plain / "sub" / "a.jsonl", outdir / "nul\x00byte.jsonl", "/proc/1/no-such-dir/a.jsonl"):
        code, _, err = export(capsys, db, bad)
        assert refused(code, err), (bad, err)
    assert plain.read_text() == "x"


def test_a_symlinked_folder_is_not_followed(db, capsys, outdir, tmp_path):
    """Issue 26 item 18: `--out link_to_etc/x.jsonl` wrote into the folder the link names."""
    real = tmp_path / "elsewhere"
    real.mkdir()
    (outdir / "link").symlink_to(real, target_is_directory=True)
    for bad in (outdir / "link" / "x.jsonl", outdir / "link" / "deeper" / "x.jsonl"):
        code, _, err = export(capsys, db, bad)
        assert refused(code, err) and "symbolic link" in err, (bad, err)
    assert list(real.iterdir()) == []
    code, _, err = export(capsys, db, real / "x.jsonl")  # the real folder is fine
    assert code == 0, err


def test_missing_folders_are_not_created(db, capsys, outdir):
    code, _, err = export(capsys, db, outdir / "typo" / "deeper" / "x.jsonl")
    assert refused(code, err) and "no folder" in err, err
    assert list(outdir.iterdir()) == []


def test_nan_never_reaches_an_export():
    """Issue 26 item 18: NaN/Infinity are not JSON; no record takes them, the writer refuses them."""
    from pydantic import ValidationError

    from sessions.exchange.export import _dumps
    from trajectory.records import AgentConfig

    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValidationError):
            AgentConfig(temperature=bad)
        with pytest.raises(ValueError):
            _dumps({"temperature": bad})
