"""SIGTERM and SIGHUP stop a run as Ctrl-C does: the run is recorded ``interrupted``."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP stopped the run; handled like Ctrl-C (the run is ``interrupted``)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"terminated by {signal.Signals(signum).name}")


@contextmanager
def signals_interrupt() -> Iterator[None]:
    """While active (in the main thread), SIGTERM and SIGHUP raise :class:`Terminated`.

    A second such signal is not caught (it ends the process as it would have), and a
    signal ignored before (``nohup``) stays ignored.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        signal.signal(signum, signal.SIG_DFL)
        raise Terminated(signum)

    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is None or signal.getsignal(signum) is signal.SIG_IGN:
            continue
        previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
