"""PNG charts of the benchmarks' figures (the ``plot`` extra: matplotlib)."""

from __future__ import annotations


def bars(path: str, title: str, labels: list[str],
         panels: list[tuple[str, list[float], str]]) -> None:
    """One bar chart per ``(y label, values, value format)`` panel, side by side, a bar per
    label, written to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels) + 1, 4.5),
                             squeeze=False)
    for axis, (unit, values, fmt) in zip(axes[0], panels):
        drawn = axis.bar(range(len(values)), values, color="#3b6ea5")
        axis.bar_label(drawn, fmt=fmt, fontsize=8)
        axis.set_xticks(range(len(values)), labels, fontsize=8)
        axis.set_ylabel(unit)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"chart: {path}")
