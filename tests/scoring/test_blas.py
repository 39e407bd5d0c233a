"""`scoring.blas.one_thread`: BLAS on one thread while any thread scores, restored after."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

from scoring import blas


class _FakeLimit:
    """threadpoolctl's limit as it behaves: the threads it found are what it restores."""

    def __init__(self, library: dict[str, int]) -> None:
        self._library, self._original = library, library["threads"]
        library["threads"] = 1

    def restore_original_limits(self) -> None:
        self._library["threads"] = self._original

    def __enter__(self) -> _FakeLimit:
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore_original_limits()


class _FakeController:
    def __init__(self) -> None:
        self.library = {"threads": 4}

    def limit(self, limits: int, user_api: str) -> _FakeLimit:
        assert (limits, user_api) == (1, "blas")
        return _FakeLimit(self.library)


def _first_in_first_out(threads: Callable[[], Any]) -> Any:
    """Thread A enters, B enters, A leaves, B leaves; `threads()` as B sees it after A left."""
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[Any] = []

    def a() -> None:
        with blas.one_thread():
            a_in.set()
            assert b_in.wait(10)
        a_out.set()

    def b() -> None:
        assert a_in.wait(10)
        with blas.one_thread():
            b_in.set()
            assert a_out.wait(10)
            seen.append(threads())

    workers = [threading.Thread(target=a), threading.Thread(target=b)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(10)
    assert len(seen) == 1
    return seen[0]


def test_overlapping_bodies_in_two_threads_restore_the_threads_once_both_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each body with a limit of its own: B, leaving last, restored the 1 that A's limit had
    set, and BLAS kept one thread for the rest of the process."""
    controller = _FakeController()
    monkeypatch.setattr(blas, "_controller", controller)
    assert _first_in_first_out(lambda: controller.library["threads"]) == 1  # B still inside
    assert controller.library["threads"] == 4
    with blas.one_thread():
        with blas.one_thread():
            assert controller.library["threads"] == 1
        assert controller.library["threads"] == 1
    assert controller.library["threads"] == 4


def _forked(child: Callable[[], bool]) -> int:
    """The exit code of a child forked here that runs `child`: 0 if it returned True."""
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            ok = child()
        finally:
            os._exit(0 if ok else 1)  # never back into pytest
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_a_child_forked_while_another_thread_is_in_a_body_has_its_blas_threads_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fork copied the other thread's body as still running, and nothing in the child
    ended it: BLAS kept the one thread it had set for the child's life, and the child's own
    bodies, never the last, restored nothing."""
    controller = _FakeController()
    monkeypatch.setattr(blas, "_controller", controller)
    inside, leave = threading.Event(), threading.Event()

    def body() -> None:
        with blas.one_thread():
            inside.set()
            assert leave.wait(10)

    other = threading.Thread(target=body)
    other.start()
    try:
        assert inside.wait(10)

        def child() -> bool:
            seen = [controller.library["threads"]]
            with blas.one_thread():
                seen.append(controller.library["threads"])
            return [*seen, controller.library["threads"]] == [4, 1, 4]

        assert _forked(child) == 0
    finally:
        leave.set()
        other.join(10)
    assert controller.library["threads"] == 4


def test_a_child_forked_within_a_body_restores_the_threads_as_it_leaves_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The body that forked goes on in the child, so the limit stays until it ends there:
    the fork forgets the other threads' bodies, not its own."""
    controller = _FakeController()
    monkeypatch.setattr(blas, "_controller", controller)
    with contextlib.ExitStack() as body:
        body.enter_context(blas.one_thread())

        def child() -> bool:
            inside = controller.library["threads"]
            body.close()
            return (inside, controller.library["threads"]) == (1, 4)

        assert _forked(child) == 0
    assert controller.library["threads"] == 4
