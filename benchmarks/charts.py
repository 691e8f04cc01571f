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


def distributions(path: str, title: str,
                  panels: list[tuple[str, dict[str, tuple[list[float], int]]]]) -> None:
    """One panel per ``(title, {label: (values, total)})``: each label's values as a cumulative
    share of ``total`` (x logarithmic: a curve ending below 1 leaves the rest without a value),
    written to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, NullFormatter

    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels) + 1, 4.5), squeeze=False)
    for axis, (name, series) in zip(axes[0], panels):
        for label, (values, total) in series.items():
            ordered = sorted(max(v, 1e-3) for v in values)
            axis.plot(ordered, [(i + 1) / total for i in range(len(ordered))], label=label)
        axis.set_xscale("log")
        axis.xaxis.set_major_formatter(FormatStrFormatter("%g"))
        axis.xaxis.set_minor_formatter(NullFormatter())
        axis.set_ylim(0, 1.02)
        axis.set_xlabel("seconds from production to the first output (log)")
        axis.set_ylabel("share of the clicks measured")
        axis.set_title(name, fontsize=9)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"chart: {path}")
