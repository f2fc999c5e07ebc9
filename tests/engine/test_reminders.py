"""A reminder lets a key be said again once its interval is over, never sooner, and
remembers a bounded number of keys."""

from __future__ import annotations

import threading

from ratelimits.engine.reminders import INTERVAL, Reminder
from tests.helpers import ManualClock as Clock


def test_a_key_is_due_again_once_its_interval_is_over() -> None:
    clock = Clock()
    reminder = Reminder(clock=clock)
    assert reminder.interval == INTERVAL == 60.0
    assert reminder.due("policy")
    clock.now += 59.9
    assert not reminder.due("policy")
    clock.now += 0.1
    assert reminder.due("policy")
    assert not reminder.due("policy")


def test_each_key_has_its_own_interval() -> None:
    clock = Clock()
    reminder = Reminder(10, clock=clock)
    assert reminder.due("a")
    clock.now += 5
    assert reminder.due("b")
    assert not reminder.due("a")
    clock.now += 5
    assert reminder.due("a")
    assert not reminder.due("b")


def test_a_full_reminder_says_no_new_key_until_one_is_forgotten() -> None:
    clock = Clock()
    reminder = Reminder(10, size=3, clock=clock)
    assert [reminder.due(f"view{i}") for i in range(5)] == [True, True, True, False, False]
    assert len(reminder._said) == 3
    clock.now += 5
    assert not reminder.due("view3")  # still full: the first three were said 5 s ago
    clock.now += 5
    assert [reminder.due(f"view{i}") for i in range(3, 8)] == [True, True, True, False, False]
    assert len(reminder._said) == 3


def test_many_keys_never_grow_it_past_its_size() -> None:
    clock = Clock()
    reminder = Reminder(size=100, clock=clock)
    for i in range(10_000):
        reminder.due(f"attacker-chosen-{i}")
        clock.now += 0.01
    assert len(reminder._said) == 100


def test_clear_makes_every_key_due_at_once() -> None:
    reminder = Reminder(clock=Clock())
    assert reminder.due("a") and reminder.due("b")
    reminder.clear()
    assert reminder.due("a") and reminder.due("b")
    assert not reminder.due("a")


def test_threads_asking_together_say_it_once() -> None:
    reminder = Reminder()
    start = threading.Barrier(8)
    answers: list[bool] = []

    def ask() -> None:
        start.wait()
        answers.extend(reminder.due("shared") for _ in range(100))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers.count(True) == 1 and len(answers) == 800
