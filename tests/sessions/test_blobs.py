"""Content-addressed blobs (the Wikipedia pages an episode read): storing the same page twice
is a no-op, from one Store or two."""

from sessions.store import Store


def test_the_same_blob_stored_twice_keeps_one_copy(tmp_path):
    a, b = Store(tmp_path / "b.db"), Store(tmp_path / "b.db")
    k1 = a.blobs.put(b"<p>Ostwick</p>")
    assert b.blobs.put(b"<p>Ostwick</p>") == k1 == a.blobs.put(b"<p>Ostwick</p>")
    assert a.blobs.get(k1) == b"<p>Ostwick</p>" and b.blobs.get("nope") is None
