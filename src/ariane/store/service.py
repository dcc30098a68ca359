"""A stoppable background thread with an interruptible wait (RocketMQ ``ServiceThread``)."""

from __future__ import annotations

import logging
import threading

__all__ = ["ServiceThread"]

logger = logging.getLogger(__name__)


class ServiceThread:
    """Runs ``run_once`` in a loop on its own daemon thread until ``stop``.

    Subclasses implement ``run_once`` (one round of work) and may call ``wait(seconds)``,
    which returns early when ``wakeup`` or ``stop`` is called. Exceptions in a round are
    logged and the loop goes on.

    Args:
        name: the thread name.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._event = threading.Event()
        self._stopped = False
        self._skip_final = False
        self._thread: threading.Thread | None = None

    @property
    def stopped(self) -> bool:
        """True once ``stop`` was called."""
        return self._stopped

    def start(self) -> None:
        """Start the thread."""
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        """Cut the current ``wait`` short.

        Nothing to do while the event is already set (many puts of one loop turn wake a
        thread that has not run yet): the thread either has not returned from its ``wait``
        yet, or has and clears the event before its next round, which sees whatever the
        caller did before this call. ``Event.set`` takes the event's lock every time."""
        event = self._event
        if not event.is_set():
            event.set()

    def wait(self, seconds: float) -> None:
        """Wait up to ``seconds`` or until woken."""
        if not self._stopped:
            self._event.wait(seconds)
        self._event.clear()

    def stop(self, join_timeout_s: float = 30.0) -> None:
        """Stop the loop and join the thread; ``on_stop`` runs on the thread at the end."""
        self._stopped = True
        self._event.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(join_timeout_s)
            if thread.is_alive():
                logger.error("%s did not stop within %.0f s", self.name, join_timeout_s)

    def abandon(self, join_timeout_s: float = 30.0) -> None:
        """Stop without the final ``on_stop`` round (what a crash would leave)."""
        self._skip_final = True
        self.stop(join_timeout_s)

    def on_start(self) -> None:
        """Runs once on the thread before its first round (nothing by default)."""

    def _loop(self) -> None:
        try:
            self.on_start()
        except Exception:
            logger.exception("%s start failed", self.name)
        while not self._stopped:
            try:
                self.run_once()
            except Exception:
                logger.exception("%s round failed", self.name)
                self.wait(0.1)
        if self._skip_final:
            return
        try:
            self.on_stop()
        except Exception:
            logger.exception("%s final round failed", self.name)

    def run_once(self) -> None:
        """One round of work (override)."""
        raise NotImplementedError

    def on_stop(self) -> None:
        """Final work after the loop ends (override)."""
