"""The keeper thread: jobs run in order in one thread that outlives them; a thread stuck
in a job is left to it; a forked child gets a thread of its own."""

from __future__ import annotations

import os
import threading

import pytest

from ratelimits.engine.table.keeper import THREAD_NAME, Keeper


def test_jobs_run_in_order_in_one_thread_that_stays():
    keeper = Keeper()
    ran: list[tuple[int, str]] = []
    for number in range(3):
        keeper.submit(lambda n=number: ran.append((n, threading.current_thread().name)))
    assert keeper.wait_idle(10)
    assert [n for n, _ in ran] == [0, 1, 2]
    assert {name for _, name in ran} == {THREAD_NAME}
    threads = [t for t in threading.enumerate() if t.name == THREAD_NAME]
    keeper.submit(lambda: ran.append((3, threading.current_thread().name)))
    assert keeper.wait_idle(10)
    assert [t for t in threading.enumerate() if t.name == THREAD_NAME] == threads  # no new one


def test_a_failing_job_is_logged_and_the_next_still_runs(caplog):
    keeper = Keeper()
    ran: list[str] = []

    def fails() -> None:
        raise RuntimeError("the database is down")

    keeper.submit(fails)
    keeper.submit(lambda: ran.append("next"))
    assert keeper.wait_idle(10)
    assert ran == ["next"]
    assert "a background policy-table job failed" in caplog.text


def test_a_stuck_job_is_left_to_its_thread_and_a_new_one_takes_the_next():
    keeper = Keeper()
    release, stuck_in = threading.Event(), []
    keeper.submit(lambda: (stuck_in.append(threading.current_thread()), release.wait(10)))
    keeper.abandon()
    done = threading.Event()
    keeper.submit(lambda: done.set() if threading.current_thread() not in stuck_in else None)
    assert done.wait(10)  # ran while the first thread is still stuck
    assert not keeper.wait_idle(0)
    release.set()
    assert keeper.wait_idle(10)
    stuck_in[0].join(10)
    assert not stuck_in[0].is_alive()  # the abandoned thread ended after its job


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_child_runs_its_jobs_in_a_thread_of_its_own():
    from ratelimits.engine.table.keeper import keeper

    keeper.submit(lambda: None)
    assert keeper.wait_idle(10)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's thread is not here
        try:
            keeper.submit(lambda: os.write(write, b"ran"))
            os._exit(0 if keeper.wait_idle(10) else 1)
        finally:
            os._exit(2)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    assert os.read(read, 10) == b"ran"
    assert os.waitstatus_to_exitcode(status) == 0
