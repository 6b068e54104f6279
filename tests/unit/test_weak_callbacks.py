"""explorables/components/weak_callbacks.py: a callback left behind by a closed page keeps nothing of it."""

from __future__ import annotations

import gc
import weakref

from blocktrace.explorables.components.weak_callbacks import weakly


class View:
    def __init__(self) -> None:
        self.calls: list[int] = []

    def poll(self, value: int = 1) -> int:
        self.calls.append(value)
        return value


def test_a_bound_method_is_called_while_its_object_lives_and_not_kept_alive():
    view = View()
    callback = weakly(view.poll)
    assert callback(3) == 3 and view.calls == [3]
    gone = weakref.ref(view)
    del view
    gc.collect()
    assert gone() is None and callback(4) is None


def test_a_closure_lives_as_long_as_its_page_holds_it():
    view, calls = View(), []

    def poll() -> None:
        calls.append(0)

    view.held = poll  # as the page holds it
    callback = weakly(poll)
    del poll
    callback()
    assert calls == [0]
    gone = weakref.ref(view)
    del view
    gc.collect()
    assert gone() is None and callback() is None
    assert "poll" in callback.__name__
