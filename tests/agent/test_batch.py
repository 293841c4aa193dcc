"""The concurrent job runner (agent/batch.py) and the shared rate-limit pause gate."""

from __future__ import annotations

import re
import threading
import time

import pytest

from agent.batch import BatchAborted, JobResult, run_batch
from agent.client import ModelClient, public_url
from agent.ratelimit import gate_for
from tests.scripted_server import Reply, ScriptedLLM
from trajectory.records import AgentConfig


def _square(x: int) -> int:
    if x < 0:
        raise ValueError(f"negative\n{x}")
    return x * x


def test_results_in_key_order_with_errors_as_one_line():
    res = run_batch([3, -1, 2], _square, concurrency=2)
    assert [r.key for r in res] == [3, -1, 2]
    assert [r.ok for r in res] == [True, False, True]
    assert res[0].value == 9 and res[2].value == 4
    assert res[1].error == "negative -1"


def test_concurrency_runs_jobs_at_once():
    active, peak, lock = [0], [0], threading.Lock()

    def work(k):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.2)
        with lock:
            active[0] -= 1
        return k

    run_batch(range(8), work, concurrency=4)
    assert peak[0] == 4  # four at once (the speed-up is benchmarks/experiment.py's business)


def test_stop_launches_nothing_new_and_in_flight_jobs_finish():
    stop = threading.Event()
    seen: list[JobResult] = []

    def work(k):
        time.sleep(0.05)
        if k == 1:
            stop.set()
        return k

    res = run_batch(range(10), work, concurrency=2, stop=stop, on_result=seen.append)
    assert 2 <= len(res) <= 3 and all(r.ok for r in res)
    assert sorted(r.key for r in seen) == sorted(r.key for r in res)


def test_consecutive_failures_abort_with_one_message():
    calls = []

    def refuse(k):
        calls.append(k)
        raise ConnectionError("connection refused")

    with pytest.raises(BatchAborted) as info:
        run_batch(range(50), refuse, concurrency=2, max_consecutive_failures=4)
    msg = str(info.value)
    assert "\n" not in msg and "connection refused" in msg
    assert re.search(r"after [45] failures in a row", msg)
    assert 4 <= len(info.value.results) <= 5 and len(calls) <= 5


def test_a_success_resets_the_failure_streak():
    res = run_batch([-1, -2, 1, -3, -4, 2], _square, max_consecutive_failures=3)
    assert [r.ok for r in res] == [False, False, True, False, False, True]


def test_callbacks_run_one_at_a_time_once_per_job():
    """Workers report their own results: on_result never runs twice at once, and hears
    every job exactly once."""
    inside, most, seen = [0], [0], []

    def on_result(res: JobResult) -> None:
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.002)  # (long enough for another worker to finish meanwhile)
        seen.append(res.key)
        inside[0] -= 1

    res = run_batch(range(40), _square, concurrency=8, on_result=on_result)
    assert most[0] == 1 and sorted(seen) == list(range(40)) and [r.value for r in res] == [k * k for k in range(40)]


def test_a_callback_that_raises_stops_the_batch_and_reaches_the_caller():
    started = []

    def work(k):
        started.append(k)
        time.sleep(0.01)
        return k

    def on_result(res: JobResult) -> None:
        raise RuntimeError(f"callback failed on {res.key}")

    with pytest.raises(RuntimeError, match="callback failed"):
        run_batch(range(100), work, concurrency=2, on_result=on_result)
    assert len(started) <= 4  # nothing new started once it raised (the jobs in flight ended)


def test_a_batch_runs_on_its_own_threads_and_waits_for_them():
    ran_on: set[threading.Thread] = set()

    def work(k):
        time.sleep(0.01)
        ran_on.add(threading.current_thread())
        return k

    run_batch(range(20), work, concurrency=3)
    assert len(ran_on) == 3 and threading.current_thread() not in ran_on and not any(t.is_alive() for t in ran_on)


def test_ctrl_c_stops_the_batch_once_the_jobs_in_flight_end():
    """Ctrl-C (KeyboardInterrupt in the caller's thread) sets `stop`, starts nothing new,
    and propagates once the jobs in flight, which watch `stop`, have ended."""
    import _thread

    stop = threading.Event()
    started, ended = [], []

    def work(k):
        started.append(k)
        if len(started) == 3:
            _thread.interrupt_main()
        stop.wait(5)  # a job that watches Stop ends at once
        ended.append(k)
        return k

    with pytest.raises(KeyboardInterrupt):
        run_batch(range(50), work, concurrency=3, stop=stop)
    assert stop.is_set() and len(started) == 3 and sorted(ended) == sorted(started)


def test_process_mode_runs_in_other_processes():
    import os

    res = run_batch([1, 2, 3], _pid, concurrency=2, mode="processes")
    assert all(r.ok for r in res) and all(r.value != os.getpid() for r in res)


def _pid(_k):
    import os

    return os.getpid()


def test_bad_arguments():
    with pytest.raises(ValueError):
        run_batch([1], _square, concurrency=0)
    with pytest.raises(ValueError):
        run_batch([1], _square, mode="fibers")
    assert run_batch([], _square) == []


def test_rate_limit_pauses_every_client_of_the_endpoint(scripted_llm: ScriptedLLM):
    """One 429 with Retry-After makes the other threads wait too, and no call fails."""
    scripted_llm.push(Reply(status=429, retry_after=0.6))
    scripted_llm.set_default(Reply(text="ok", delay_s=0.05))
    config = AgentConfig(model="m", base_url=scripted_llm.base_url, max_retries=1, cache=False)

    gate = gate_for(public_url(scripted_llm.base_url))
    seen = gate.pauses

    def work(k):
        while k and gate.pauses == seen:  # the others start once the first call was refused
            time.sleep(0.01)
        return ModelClient(config, api_key="k").complete(f"p{k}", [])[0]

    res = run_batch(range(4), work, concurrency=4)
    assert [r.value for r in res] == ["ok"] * 4  # the 429 took the refused call's one retry (issue 38: it counts)
    first_429 = scripted_llm.requests[0].received_at
    later = [r.received_at - first_429 for r in scripted_llm.requests[1:]]
    assert len(later) == 4 and min(later) >= 0.55  # all waited for the pause, the refused one too
