"""What the benchmarks report about the machine while they run."""

from __future__ import annotations

import os
from typing import Self


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


class _Sampler:
    """Calls :meth:`sample` every ``interval`` seconds in a thread while open."""

    def __init__(self, interval: float) -> None:
        import threading

        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval):
                return

    def sample(self) -> None:
        raise NotImplementedError


class WorkerMemory(_Sampler):
    """The peak resident memory of this process's Python descendants (Spark's Python workers
    and their daemon), sampled from ``/proc`` every ``interval`` seconds in a thread while the
    object is open: the largest single worker, and all of them together."""

    def __init__(self, interval: float = 0.2) -> None:
        super().__init__(interval)
        self.peak_worker = 0
        self.peak_total = 0
        self._me = os.getpid()

    def sample(self) -> None:
        sizes = [rss for pid, rss in _python_descendants(self._me)]
        if sizes:
            self.peak_worker = max(self.peak_worker, max(sizes))
            self.peak_total = max(self.peak_total, sum(sizes))

    def text(self) -> str:
        mib = 1 << 20
        return (f"Python workers' peak memory: {self.peak_worker / mib:,.0f} MiB in one, "
                f"{self.peak_total / mib:,.0f} MiB together")


def _python_descendants(root: int) -> list[tuple[int, int]]:
    """``(pid, resident bytes)`` of every Python process below ``root`` (Linux ``/proc``)."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
            parents[int(name)] = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError):
            continue
    out = []
    for pid in parents:
        up, seen = parents.get(pid), 0
        while up is not None and up != root and seen < 64:
            up, seen = parents.get(up), seen + 1
        if up != root:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"python" not in f.read().split(b"\0")[0]:
                    continue
            with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
                rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))
        except (OSError, StopIteration, ValueError):
            continue
        out.append((pid, rss))
    return out


def process_kind(pid: int) -> str:
    """What a process of an engine is, from its command line: ``JVM``, ``Python worker`` (a
    PySpark worker or its daemon), ``Python`` (any other Python process) or the program's name."""
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().decode(errors="replace").split("\0")
    program = os.path.basename(argv[0])
    if program == "java":
        return "JVM"
    if program.startswith("python"):
        return ("Python worker" if any("daemon" in a or "worker" in a for a in argv[1:])
                else "Python")
    return program or "other"


def _memory(pid: int) -> tuple[int, int]:
    """``(resident, proportional)`` bytes of ``pid``: its RSS, and its PSS (each page it shares
    with other processes counted as its share; ``/proc/<pid>/smaps_rollup``, else its RSS)."""
    rss = pss = None
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    if rss is None:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))
    return rss, rss if pss is None else pss


class ProcessTree(_Sampler):
    """CPU seconds and peak memory of a process and all its descendants (an engine: its JVMs,
    Python workers, ...), sampled from ``/proc`` every ``interval`` seconds in a thread while
    open. A process's CPU time counts as last sampled (a process that lives less than
    ``interval`` may be missed; one that exits loses at most its last interval). Memory is the
    peak of the processes' sum at one sample: ``peak_pss`` of their proportional set sizes
    (the memory the tree uses: pages that forked workers share with their parent counted once),
    ``peak_rss`` of their resident sizes (which counts such pages in every process);
    ``peak_parts`` splits ``peak_pss`` by kind of process (:func:`process_kind`): how many
    processes of each kind and their PSS."""

    def __init__(self, root: int, interval: float = 0.1) -> None:
        super().__init__(interval)
        self.root = root
        self.cpu: dict[int, float] = {}
        self.peak_rss = 0
        self.peak_pss = 0
        self.peak_parts: dict[str, tuple[int, int]] = {}
        self._tick = os.sysconf("SC_CLK_TCK")

    def sample(self) -> None:
        stats: dict[int, tuple[int, float]] = {}  # pid -> (parent, cpu seconds)
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                stats[int(name)] = (int(fields[1]), (int(fields[11]) + int(fields[12]))
                                    / self._tick)
            except (OSError, ValueError, IndexError):
                continue
        tree = {self.root} if self.root in stats else set()
        grew = True
        while grew:
            below = {pid for pid, (parent, _) in stats.items() if parent in tree} - tree
            grew = bool(below)
            tree |= below
        rss = pss = 0
        parts: dict[str, tuple[int, int]] = {}  # kind -> (processes, PSS)
        sizes: dict[int, tuple[int, int, str]] = {}
        for pid in tree:
            self.cpu[pid] = max(self.cpu.get(pid, 0.0), stats[pid][1])
            try:
                # the kind read each time: a launcher script execs its JVM
                sizes[pid] = (*_memory(pid), process_kind(pid))
            except (OSError, StopIteration, ValueError):
                continue
        for pid, (resident, proportional, kind) in sizes.items():
            parent = sizes.get(stats[pid][0])
            if parent is not None and parent[:2] == (resident, proportional):
                continue  # a child sharing its parent's memory (vfork, before its exec)
            rss += resident
            pss += proportional
            count, size = parts.get(kind, (0, 0))
            parts[kind] = (count + 1, size + proportional)
        self.peak_rss = max(self.peak_rss, rss)
        if pss > self.peak_pss:
            self.peak_pss, self.peak_parts = pss, parts

    def parts_text(self) -> str:
        """``peak_parts`` in MiB, largest first, with the number of processes of each kind."""
        return ", ".join(f"{kind} x{count} {size / 2**20:,.0f}" for kind, (count, size) in
                         sorted(self.peak_parts.items(), key=lambda item: -item[1][1]))

    @property
    def cpu_seconds(self) -> float:
        return sum(self.cpu.values())
