"""How far ahead of the CommitLog writer the allocation thread warms pages, and how fast.

How it works (issue 18): a fresh page-cache page of the fallocated CommitLog file costs ~7 µs
of kernel time on this project's VM, the same whoever touches it first. Warming a fixed window
ahead of the writer makes a burst pay for its pages inside the burst (the window moves with
the writer). :class:`WarmPacer` works like a buffer refilled while idle:

* the writer is *fast* while it moved more than ``fast_writer_bytes_per_s`` ×
  :data:`RATE_WINDOW_S` bytes within one rate window (a burst is seen at the first look
  after that many bytes), and for :data:`BURST_HOLD_S` after the last such window (consumers
  catch up right after a burst: the refill waits for a quieter broker). While fast,
  only ``min_lead_bytes`` is kept warm ahead of it, at once (no pause): the writer never
  meets a cold page, and the burst does no more warming than that; a writer so fast that
  it moves more than that in :data:`BURST_LEAD_S` (``bench store``'s one writer: 360 MB/s)
  gets that much instead, up to ``max_lead_bytes`` (its rate over the last window; none
  with a ``min_lead_bytes`` of 0; the thread looks every 20 ms and a step takes ~10-35 ms,
  so 16 MiB was gone before the next step was read);
* while idle or slow, the lead is refilled up to ``max_lead_bytes``, one step then a pause of
  :data:`IDLE_STEP_PAUSE_S` (an idle broker does not hold a CPU), starting once the lead is
  :data:`REFILL_GAP_BYTES` short of the maximum (a burst's first bytes are seen as a burst
  before any refill step) and going on until it is full; below ``min_lead_bytes`` the steps
  come without a pause whatever the writer's rate.

Each step says how many bytes it warms (one ``preadv``, with the GIL released): a paced refill
step :data:`REFILL_STEP_BYTES`, a step at once (a burst's lead, or a lead below the minimum)
the whole shortfall up to :data:`CATCH_UP_STEP_BYTES`. The thread takes the GIL a few times per
step (the descriptor's duplicate, the read's return, its close) and, while one writer keeps it
busy, each take waits up to the interpreter's switch interval (5 ms): with 1 MiB steps a burst's
lead was warmed at ~70 MB/s, and a 300 MB/s writer of ``bench store`` ran ahead of it into cold
pages for most of its run (issue 18).

A burst of up to ``max_lead_bytes`` then writes into pages warmed before it began. The lead is
also bounded by what the file queue keeps (the current file and the next one:
:meth:`~ariane.store.mapped_file_queue.MappedFileQueue.prepare_ahead`). No I/O and no clock
here: :meth:`WarmPacer.decide` is given the time and the positions.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BURST_HOLD_S",
    "BURST_LEAD_S",
    "CATCH_UP_STEP_BYTES",
    "IDLE_STEP_PAUSE_S",
    "RATE_WINDOW_S",
    "REFILL_GAP_BYTES",
    "REFILL_STEP_BYTES",
    "WARM_FAST_WRITER_BYTES_PER_S",
    "WARM_MAX_LEAD_BYTES",
    "WARM_MIN_LEAD_BYTES",
    "WarmPacer",
    "WarmStep",
]

#: Kept warm ahead of the writer at any rate (``commitLogWarmMinLead``): at 300 MB/s (the
#: in-process ``bench store``) a writer moves 6 MB between two 20 ms looks.
WARM_MIN_LEAD_BYTES = 16 << 20
#: Filled ahead of the writer while it is idle or slow (``commitLogWarmMaxLead``).
WARM_MAX_LEAD_BYTES = 256 << 20
#: A writer faster than this is in a burst (``commitLogWarmFastWriterRate``): about 800
#: messages of 1 KiB a second. The peer harness's latency phase (2,000 a second, 2.4 MB/s)
#: is a burst: at 4 MB/s it counted as slow, and crossing into a new file there started a
#: refill of the next one (its creation and 64 MiB of steps) inside the latency phase.
WARM_FAST_WRITER_BYTES_PER_S = 1_000_000

#: The window over which the writer's rate is judged.
RATE_WINDOW_S = 0.2
#: How long a writer stays fast after its last window over the rate (in the peer harness
#: the consumers drain a burst in the second after it; a refill then took 15 % of their rate).
BURST_HOLD_S = 1.0
#: A fast writer's lead covers this much of its writing at its last window's rate.
BURST_LEAD_S = 0.1
#: Pause after each refill step while the writer is idle or slow.
IDLE_STEP_PAUSE_S = 0.002
#: How far below the maximum the lead falls before a refill starts.
REFILL_GAP_BYTES = 8 << 20
#: Bytes warmed by one step of a paced refill: on this project's VM a fresh page-cache page
#: costs 2-7 µs of kernel time, so ~2 ms of one CPU, then a pause (an 8 MiB step, ~15 ms,
#: showed in the latency tail of the peer harness).
REFILL_STEP_BYTES = 1 << 20
#: Most bytes warmed by one step at once (a burst's lead or a lead below the minimum, no
#: pause): the shortfall of a fast writer since the last look, in one read.
CATCH_UP_STEP_BYTES = 16 << 20


@dataclass(frozen=True, slots=True)
class WarmStep:
    """What the allocation thread does next: warm up to ``lead_bytes`` ahead of the writer
    (nothing when the lead is already that long), at most ``step_bytes`` of it in this step,
    then wait ``pause_s`` after a step that did something before the next one (0: at once)."""

    lead_bytes: int
    pause_s: float
    step_bytes: int


class WarmPacer:
    """Decides the lead to warm from the writer's positions over time (see module docstring).

    Args:
        min_lead_bytes: kept warm ahead of the writer at any rate.
        max_lead_bytes: filled while the writer is idle or slow.
        fast_writer_bytes_per_s: a writer faster than this is in a burst.
    """

    def __init__(
        self, min_lead_bytes: int, max_lead_bytes: int, fast_writer_bytes_per_s: int
    ) -> None:
        self.min_lead = max(0, min_lead_bytes)
        self.max_lead = max(self.min_lead, max_lead_bytes)
        self.burst_bytes = fast_writer_bytes_per_s * RATE_WINDOW_S
        #: a refill starts once the lead is at or below this
        self.refill_at = self.max_lead - min(REFILL_GAP_BYTES, self.max_lead - self.min_lead)
        #: the writer is in a burst
        self.fast = False
        #: when the last rate window over the rate ended
        self._burst_s: float | None = None
        #: a refill towards ``max_lead`` is under way
        self.filling = False
        self._ref_s: float | None = None
        self._ref_offset = 0
        #: the writer's rate over the last window over ``burst_bytes`` (bytes a second)
        self.rate = 0.0

    def _observe(self, now_s: float, write_offset: int) -> None:
        if self._ref_s is None or write_offset < self._ref_offset:
            self._ref_s, self._ref_offset = now_s, write_offset
            return
        if write_offset - self._ref_offset > self.burst_bytes:
            if now_s > self._ref_s:
                self.rate = (write_offset - self._ref_offset) / (now_s - self._ref_s)
            self._burst_s = now_s
            self._ref_s, self._ref_offset = now_s, write_offset
        elif now_s - self._ref_s >= RATE_WINDOW_S:
            self._ref_s, self._ref_offset = now_s, write_offset
        self.fast = self._burst_s is not None and now_s - self._burst_s < BURST_HOLD_S

    def decide(self, now_s: float, write_offset: int, warmed_to: int) -> WarmStep:
        """The next step for a writer at ``write_offset`` at ``now_s`` (monotonic seconds)
        with pages warmed up to ``warmed_to``."""
        self._observe(now_s, write_offset)
        lead = warmed_to - write_offset
        if self.fast:
            self.filling = False
            rate_lead = int(self.rate * BURST_LEAD_S) if self.min_lead else 0  # 0: none in a burst
            burst_lead = min(self.max_lead, max(self.min_lead, rate_lead))
            return WarmStep(burst_lead, 0.0, CATCH_UP_STEP_BYTES)
        if lead >= self.max_lead:
            self.filling = False
        elif lead <= self.refill_at or lead < self.min_lead:
            self.filling = True
        if not self.filling:
            return WarmStep(self.min_lead, 0.0, CATCH_UP_STEP_BYTES)
        if lead < self.min_lead:  # at once up to the minimum, paced steps beyond it
            short = min(CATCH_UP_STEP_BYTES, self.min_lead - lead)
            return WarmStep(self.max_lead, 0.0, max(REFILL_STEP_BYTES, short))
        return WarmStep(self.max_lead, IDLE_STEP_PAUSE_S, REFILL_STEP_BYTES)
