"""What the benchmarks report about the machine while they run."""

from __future__ import annotations

import os


class Steal:
    """The share of this machine's CPU time the hypervisor gave to others (``steal`` in
    ``/proc/stat``) while a run was measured: on a shared virtual machine it slows both
    engines by different amounts, so a ratio measured under much steal says little."""

    def __init__(self) -> None:
        self.start = self._read()

    @staticmethod
    def _read() -> tuple[int, int] | None:
        try:
            with open("/proc/stat", encoding="ascii") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        return (fields[7] if len(fields) > 7 else 0), sum(fields)

    def fraction(self) -> float | None:
        """The steal share since this object was made (``None``: not on Linux)."""
        end = self._read()
        if self.start is None or end is None or end[1] == self.start[1]:
            return None
        return (end[0] - self.start[0]) / (end[1] - self.start[1])

    @staticmethod
    def text(fraction: float | None) -> str:
        return "steal n/a" if fraction is None else f"steal {100 * fraction:.0f}%"


def load_text() -> str:
    """The machine's 1-minute load average (other work competing for the two cores)."""
    try:
        return f"load {os.getloadavg()[0]:.1f}"
    except OSError:
        return "load n/a"
