"""The collector pause that bulk export and point ingestion share: counted, thread-safe, and it restores
what the caller had."""

from __future__ import annotations

import gc
import threading

import pytest

from whileai.domain.rows.jsonl import gc_paused


@pytest.fixture(autouse=True)
def _collector_restored():
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_overlapping_pauses_from_many_threads_keep_it_off_until_the_last_leaves():
    gc.enable()
    threads, inside, release = 8, threading.Barrier(8 + 1), threading.Event()
    seen_on: list[bool] = []

    def hold(i: int) -> None:
        with gc_paused():
            inside.wait()
            release.wait(10)
            if i % 2:  # odd threads leave early: the collector must stay off for the others
                return
        seen_on.append(gc.isenabled())

    workers = [threading.Thread(target=hold, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    inside.wait()
    assert not gc.isenabled(), "paused while any thread holds the pause"
    release.set()
    for w in workers:
        w.join(10)
    assert gc.isenabled(), "back on once the last holder left, as the caller had it"


def test_many_threads_entering_and_leaving_at_random_end_with_the_callers_setting():
    for caller_on in (True, False):
        (gc.enable if caller_on else gc.disable)()
        barrier = threading.Barrier(6)

        def churn(barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            for _ in range(500):
                with gc_paused():
                    assert not gc.isenabled()

        workers = [threading.Thread(target=churn) for _ in range(6)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(30)
        assert gc.isenabled() is caller_on


def test_a_caller_that_turned_the_collector_off_keeps_it_off_and_an_error_still_restores():
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()
    gc.enable()
    with pytest.raises(RuntimeError):
        with gc_paused():
            raise RuntimeError("boom")
    assert gc.isenabled()


def test_point_ingestion_uses_the_same_pause():
    from whileai.platform.api import runs as _runs

    assert _runs.gc_paused is gc_paused
