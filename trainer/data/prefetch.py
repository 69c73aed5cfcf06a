"""Build batches on a background thread, so parsing or generating the next batches
overlaps the current step instead of adding to it."""

from __future__ import annotations

import queue
import sys
import threading
from typing import Callable, Iterator, Optional, TypeVar

T = TypeVar("T")
_END = object()
_NONE = object()  # no item taken ahead by wait_ready
# How often a wait for the next item looks at its stop condition (a SIGTERM during a data wait).
POLL_SECONDS = 0.1
# How long a thread may hold the GIL while another waits for it. Python's default, 5 ms, is a
# third of a 2048-sample step at 150k samples/s: the training thread, back from its step, waited
# up to that long for the batch-building thread to let go (bench/data_bench.py: 43% of a
# 13.6 ms step waiting for data at the default; 1.7% at 0.2 ms, the batches already built).
GIL_SWITCH_SECONDS = 0.0002


def share_the_gil_finely() -> None:
    """Process-wide: hand the GIL over within GIL_SWITCH_SECONDS (the trainer calls it once)."""
    sys.setswitchinterval(GIL_SWITCH_SECONDS)


class Prefetched(Iterator[T]):
    """Iterate ``source`` on a daemon thread, up to ``depth`` items ahead; errors re-raise here."""

    def __init__(self, source: Iterator[T], depth: int = 8) -> None:
        self._queue: "queue.Queue[object]" = queue.Queue(maxsize=depth)
        self._closed = threading.Event()
        self._ready: object = _NONE  # an item wait_ready took off the queue, not yet returned
        self._thread = threading.Thread(target=self._fill, args=(source,), daemon=True,
                                        name="batch-prefetch")
        self._thread.start()

    def _put(self, item: object) -> bool:
        while not self._closed.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _fill(self, source: Iterator[T]) -> None:
        try:
            for item in source:
                if not self._put(item):
                    return
        except BaseException as err:  # handed to the consumer, raised in the train loop
            self._put(err)
            return
        self._put(_END)

    def __next__(self) -> T:
        item, self._ready = (self._queue.get() if self._ready is _NONE else self._ready), _NONE
        if item is _END:
            self._queue.put(_END)  # stay exhausted
            raise StopIteration
        if isinstance(item, BaseException):
            raise item
        return item  # type: ignore[return-value]

    def close(self, timeout: float = 60.0) -> None:
        """Stop the thread and wait for it: a daemon thread still inside torch code when the
        interpreter exits makes the process abort ("terminate called without an active
        exception") after training already succeeded."""
        self._closed.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def wait_ready(self, stopped: Callable[[], bool]) -> bool:
        """Wait until the next item (or the end) is ready; False as soon as ``stopped()`` holds
        instead, so a stop requested during a slow read is seen within POLL_SECONDS."""
        while self._ready is _NONE:
            try:
                self._ready = self._queue.get(timeout=POLL_SECONDS)
            except queue.Empty:
                if stopped():
                    return False
        return True

    def next_or_none(self, stopped: Optional[Callable[[], bool]] = None) -> Optional[T]:
        """The next item; None at the end, or once ``stopped()`` while waiting for it."""
        if stopped is not None and not self.wait_ready(stopped):
            return None
        return next(self, None)
