"""What repeats per model call (model, style, decoding parameters) sits once in call_params:
calls with equal parameters share a row whatever their order, and parameters that read
alike but say different JSON (0 and 0.0, True and 1) do not."""

from sessions.store import Store
from trajectory.records import ModelCall


def _call(**params) -> ModelCall:
    return ModelCall(
        model="m", api_style="completions", params=params, prompt_hash="ab", prompt_chars=2, completion="x"
    )


def _params_ids(store: Store, calls: list[ModelCall]) -> list[int]:
    ids = store.calls.record(1, calls)
    return [store.db.execute("select params_id from model_calls where id = ?", [i]).fetchone()[0] for i in ids]


def test_equal_parameters_share_a_row_and_alike_ones_do_not(tmp_path):
    store = Store(tmp_path / "c.db")
    ids = _params_ids(
        store,
        [
            _call(temperature=0.0, stop=["\n"]),
            _call(stop=["\n"], temperature=0.0),
            _call(temperature=0, stop=["\n"]),
            _call(temperature=0.0, stop=["\n"]),
            _call(flag=True),
            _call(flag=1),
            _call(flag=True),
            _call(temperature=0.0, stop=["\nX"]),
        ],
    )
    assert ids[0] == ids[1] == ids[3] and ids[4] == ids[6]
    assert len({ids[0], ids[2], ids[4], ids[5], ids[7]}) == 5
    rows = dict(store.db.execute("select id, params from call_params").fetchall())
    assert rows[ids[2]] == '{"temperature":0,"stop":["\\n"]}' and rows[ids[5]] == '{"flag":1}'
    store.close()
