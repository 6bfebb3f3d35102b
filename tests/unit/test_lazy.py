"""`iterate.lazy.lazy`: computed once per instance, kept in the instance, and never holding a shared lock."""

import threading

from iterate.lazy import lazy


class Box:
    def __init__(self, n: int) -> None:
        self.n = n
        self.calls = 0

    @lazy
    def square(self) -> int:
        """n squared."""
        self.calls += 1
        return self.n * self.n


def test_computed_once_per_instance() -> None:
    a, b = Box(3), Box(4)
    assert (a.square, a.square, b.square) == (9, 9, 16)
    assert (a.calls, b.calls) == (1, 1)
    assert a.__dict__["square"] == 9
    assert Box.square.__doc__ == "n squared."


def test_two_instances_compute_at_the_same_time() -> None:
    # Under functools.cached_property (Python < 3.12) the second thread would wait for the first to finish.
    inside = threading.Barrier(2, timeout=5)

    class Slow:
        @lazy
        def value(self) -> int:
            inside.wait()  # both threads must be in here together, or the barrier breaks
            return 1

    results: list[int] = []
    threads = [threading.Thread(target=lambda s=Slow(): results.append(s.value)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == [1, 1]
