"""Every picture appears once in a notebook.

The plot helpers make figures outside pyplot, so Jupyter's inline backend does not draw them a
second time; a lesson shows one either as its cell's last line (no semicolon) or through
``display(...)``. A helper's figure left anywhere else would not appear at all.
"""
from __future__ import annotations

import ast

import nbformat

from tests.conftest import ROOT

HELPERS = ("grader.plot.", "grader.ladder_plot", "grader.sweep_plot")


def test_helpers_make_figures_pyplot_does_not_track():
    import matplotlib.pyplot as plt

    from grader import plot

    before = set(plt.get_fignums())
    figs = [plot.ladder([("v1", 0.5), ("v2", 0.9)], target=0.8),
            plot.perf_vs_size({"v1": [(1 << 20, 100.0), (1 << 22, 200.0)]}, ceiling=300.0),
            plot.roofline([("saxpy", 1 / 6, 500.0)], mem_GBps=3000.0, peak_TFLOPs=60.0),
            plot.grid_diagram(n=10, threads_per_block=4)]
    assert set(plt.get_fignums()) == before
    assert all(f.axes for f in figs)


def _misplaced(source: str) -> list[str]:
    """Plot-helper calls that are neither the cell's final expression nor an argument of display()."""
    tree = ast.parse(source)
    last = tree.body[-1] if tree.body else None
    shown = set()
    if isinstance(last, ast.Expr) and not source.rstrip().endswith(";"):
        shown.add(id(last.value))
        if isinstance(last.value, ast.IfExp):          # `plot(...) if can else None`: either branch is the value
            shown.update((id(last.value.body), id(last.value.orelse)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "display":
            shown.update(id(a) for a in node.args)
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.get_source_segment(source, node).startswith(HELPERS):
            if id(node) not in shown:
                bad.append(ast.get_source_segment(source, node).splitlines()[0])
    return bad


def test_every_plot_in_the_lessons_is_shown_once():
    problems = []
    for path in sorted(ROOT.glob("solutions/*/*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code" and not cell.source.startswith("%%"):
                problems += [f"{path.name}:{cell.get('id')}: {line}" for line in _misplaced(cell.source)]
    assert not problems, "plots that would not appear (make them the last line, or display(...) them):\n" + "\n".join(problems)


def test_the_check_finds_a_hidden_plot():
    assert _misplaced("x = 1\ngrader.plot.ladder(rows);") == ["grader.plot.ladder(rows)"]
    assert _misplaced("if a:\n    grader.plot.ladder(rows)\n") == ["grader.plot.ladder(rows)"]
    assert _misplaced("if a:\n    display(grader.plot.ladder(rows))\n") == []
    assert _misplaced("grader.ladder_plot(v, P.x)") == []


def test_a_kernel_shows_the_helpers_figures_as_pictures():
    """Without pyplot, IPython has no picture for a Figure (the inline backend registers one only when
    pyplot is imported): a lesson's figure printed as "<Figure size …>" until grader.plot registered it."""
    from types import SimpleNamespace

    from IPython.core.formatters import DisplayFormatter

    from grader import plot

    fig = plot.ladder([("v1", 0.5), ("v2", 0.9)], target=0.8)
    shell = SimpleNamespace(display_formatter=DisplayFormatter())
    data, _ = shell.display_formatter.format(fig)
    assert "image/png" not in data and data["text/plain"].startswith("<Figure size")     # the old behaviour
    plot.show_figures_as_png(shell)
    data, _ = shell.display_formatter.format(fig)
    assert data["image/png"][:8] == b"\x89PNG\r\n\x1a\n"


def test_the_ladders_legend_sits_on_no_bar():
    """The target's legend is drawn outside the axes: inside ("lower right") it covered the last bar
    whenever that bar was the tallest (04.03's cuDNN row at 188%, 05.03's library rows)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from grader import plot

    for rows in ([("v1", 0.96), ("v2", 1.0), ("v3", 1.04), ("SDPA cuDNN (same run)", 1.88)],    # tallest last
                 [("v1", 0.2), ("v2", 0.9)], [("only", 0.5)]):
        fig = plot.ladder(rows, title="a ladder", target=0.5)
        FigureCanvasAgg(fig).draw()
        renderer = fig.canvas.get_renderer()
        legends = fig.legends + [a.get_legend() for a in fig.axes if a.get_legend()]
        assert len(legends) == 1
        box = legends[0].get_window_extent(renderer)
        ax = fig.axes[0]
        assert not box.overlaps(ax.get_window_extent(renderer)), rows          # outside the axes altogether
        assert not box.overlaps(ax.xaxis.label.get_window_extent(renderer))
        assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= fig.bbox.x1 and box.y1 <= fig.bbox.y1   # and on the figure
