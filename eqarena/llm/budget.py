"""Spend and call caps (--max-cost, --max-calls): reserve before a request, settle after it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Budget:
    """Tracks samples and USD spent plus what in-flight requests have reserved.

    A request is only sent when the spend so far, the reservations of requests in flight and this
    request's estimate all fit under the caps, so a run stops cleanly just before a cap, never after.
    """

    max_cost_usd: float | None = None
    max_samples: int | None = None
    spent_usd: float = 0.0
    samples: int = 0
    reserved_usd: float = 0.0
    reserved_samples: int = 0
    exhausted_by: str | None = None  # 'max-cost' | 'max-calls' once a reservation was refused

    def reserve(self, cost_usd: float, samples: int) -> bool:
        if self.max_samples is not None and self.samples + self.reserved_samples + samples > self.max_samples:
            self.exhausted_by = self.exhausted_by or "max-calls"
            return False
        if self.max_cost_usd is not None and self.spent_usd + self.reserved_usd + cost_usd > self.max_cost_usd:
            self.exhausted_by = self.exhausted_by or "max-cost"
            return False
        self.reserved_usd += cost_usd
        self.reserved_samples += samples
        return True

    def release(self, cost_usd: float, samples: int) -> None:
        """Return a reservation whose request produced nothing billable."""
        self.reserved_usd -= cost_usd
        self.reserved_samples -= samples

    def settle(self, reserved_usd: float, reserved_samples: int, cost_usd: float, samples: int) -> None:
        """Replace a reservation by what the request actually cost and returned."""
        self.release(reserved_usd, reserved_samples)
        self.spent_usd += cost_usd
        self.samples += samples
