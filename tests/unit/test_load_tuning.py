"""The interpreter settings a load changes while it runs, and gives back."""

from __future__ import annotations

import gc
import sys
import threading

from agefacts.preparing import interpreter_tuned


def test_loads_overlapping_in_threads_restore_the_settings_only_when_the_last_ends():
    before = (sys.getswitchinterval(), gc.get_threshold())
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, tuple[float, tuple[int, int, int]]] = {}

    def first() -> None:
        with interpreter_tuned():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with interpreter_tuned():
            second_in.set()
            first_out.wait(10)
            # The first load ended; this one still runs tuned.
            seen["after_first"] = (sys.getswitchinterval(), gc.get_threshold())

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    interval, threshold = seen["after_first"]
    assert interval <= 0.00005 and threshold[0] >= 100_000 and threshold[1:] == before[1][1:]
    assert (sys.getswitchinterval(), gc.get_threshold()) == before


def test_a_load_that_fails_gives_the_settings_back():
    before = (sys.getswitchinterval(), gc.get_threshold())
    try:
        with interpreter_tuned():
            assert gc.get_threshold()[0] >= 100_000
            raise RuntimeError("the load failed")
    except RuntimeError:
        pass
    assert (sys.getswitchinterval(), gc.get_threshold()) == before
