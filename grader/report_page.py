"""The class report as a page: one self-contained HTML file (no JavaScript, every figure embedded as
base64) and the same figures as PNG files beside it.

:func:`write` takes what grader.report gathered and writes ``report.html``, ``points.png`` and one
``speed_<problem>.png`` per speed problem that the class's GPU measured. A speed problem nobody
could measure says why in words ("no GPU: speed not measured") instead of drawing an empty plot.
"""
from __future__ import annotations

import base64
import html
import io
import re
from pathlib import Path

from .paths import shown
from .report import ClassReport, Speed

LONG_LINES, LONG_CHARS = 4, 280          # a reason longer than this is folded into <details>

CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 1.5em auto; max-width: 1150px;
       padding: 0 1em; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.full { background: #e3f4e1; } .partial { background: #fdf0d5; } .none { background: #fbe2e0; }
.wide { overflow-x: auto; } .meta td:first-child { font-weight: 600; }
pre { white-space: pre-wrap; margin: 0; font-size: 0.9em; font-family: ui-monospace, Menlo, Consolas, monospace; }
.warn { background: #fff4e5; border-left: 4px solid #e8a33d; padding: 0.5em 1em; }
.note { color: #555; } figure { margin: 0.8em 0; } img { max-width: 100%; border: 1px solid #ddd; }
summary { cursor: pointer; }
"""


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "x"


def reason_html(reason: str) -> str:
    """A verdict's text, line breaks kept; a long one folded under its first line."""
    reason = reason.strip()
    if not reason:
        return ""
    lines = reason.splitlines()
    if len(lines) <= LONG_LINES and len(reason) <= LONG_CHARS:
        return f"<pre>{esc(reason)}</pre>"
    first = lines[0] if len(lines[0]) <= 160 else lines[0][:157] + "…"
    return f"<details><summary>{esc(first)}</summary><pre>{esc(reason)}</pre></details>"


def level(points: float, maxi: float) -> str:
    return "full" if maxi and points >= maxi - 1e-9 else ("partial" if points > 0 else "none")


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()


def _figure(out: Path, name: str, fig, alt: str, caption: str) -> str:
    data = _png(fig)
    (out / name).write_bytes(data)
    return (f'<figure><img src="data:image/png;base64,{base64.b64encode(data).decode()}" alt="{esc(alt)}" '
            f'data-file="{esc(name)}"><figcaption class="note">{esc(caption)} ({esc(name)})</figcaption></figure>')


def _unit_value(r: dict) -> str:
    v = r.get("value")
    return "" if v is None else (f"{v:,.0f}" if v >= 100 else f"{v:.3g}")


def _speed_marks(sp: Speed) -> tuple:
    """(reference (fraction, label) or None, the marks in words): what the figure and its caption show."""
    target, floor = sp.common("target"), sp.common("floor")
    words = []
    if target is not None:
        words.append(f"target {100 * target:.0f}%")
    if floor is not None:
        words.append(f"floor {100 * floor:.0f}%")
    ref = None
    if sp.reference is not None and not sp.reference_note:
        r = sp.reference
        label = f"reference solution {100 * r['fraction']:.0f}% ({r['device']}, {r['date']})"
        ref = (r["fraction"], label)
        words.append(label)
    return ref, words


def speed_section(sp: Speed, out: Path) -> str:
    from .plot import class_speeds

    parts = [f'<h3 id="speed-{slug(sp.problem)}">{esc(sp.problem)} <span class="note">(cells: '
             f'{esc(", ".join(sp.cells) or "?")})</span></h3>']
    if not sp.measured:
        if sp.no_gpu:
            parts.append(f"<p class=\"warn\"><b>{esc('no GPU: speed not measured')}</b>: every submission of this "
                         "problem was graded in Numba's CUDA simulator, which times nothing. Grade on a GPU "
                         "(<code>python -m grader autograde</code> there) for this figure.</p>")
        else:
            parts.append("<p class=\"warn\"><b>speed not measured</b> for any student: each speed cell stopped "
                         "before its timed runs (the reasons are in the table below).</p>")
        if sp.reference_note:
            parts.append(f"<p class=\"note\">{esc(sp.reference_note)}.</p>")
    else:
        ref, words = _speed_marks(sp)
        first = sp.measured[0][1]
        devices = sp.devices
        where = devices[0] if len(devices) == 1 else f"{len(devices)} devices: " + ", ".join(devices)
        peer = first.get("peer") or "the peer"
        title = f"{sp.problem}: {len(sp.measured)} student(s) on {where}"
        rows = [(name, r.get("fraction"), r.get("points"), r.get("max_points"), r.get("device"))
                for name, r in sp.measured]
        note = sp.reference_note
        fig = class_speeds(rows, title=title, xlabel=f"% of {peer} (measured in the same task, same GPU)",
                           target=sp.common("target"), floor=sp.common("floor"), reference=ref, note=note)
        alt = (f"{sp.problem} on {where}: " + ", ".join(f"{n} {100 * (f or 0):.1f}%" for n, f, *_ in rows)
               + "; " + "; ".join(words + ([note] if note else [])))
        caption = (f"Each student's {first.get('unit', '')} as a fraction of {peer}, both measured by the judge on "
                   f"{where}; " + ", ".join(words) + (f"; {note}" if note else ""))
        parts.append(_figure(out, f"speed_{slug(sp.problem)}.png", fig, alt, caption))
        parts.append("<table class=\"leaderboard\"><tr><th>#</th><th>student</th><th>figure</th><th>unit</th>"
                     "<th>peer (same task)</th><th>fraction of peer</th><th>points</th><th>device</th></tr>")
        for i, (name, r) in enumerate(sp.measured, 1):
            pts, mx = r.get("points") or 0.0, r.get("max_points") or 0.0
            parts.append(f"<tr><td class=num>{i}</td><td>{esc(name)}</td><td class=num>{esc(_unit_value(r))}</td>"
                         f"<td>{esc(r.get('unit', ''))}</td><td>{esc(peer)}: {esc(_unit_value({'value': r.get('peer_value')}))} {esc(r.get('unit', ''))}"
                         f"</td><td class=\"num {level(pts, mx)}\">{100 * (r.get('fraction') or 0):.1f}%</td>"
                         f"<td class=num>{pts:g} / {mx:g}</td><td>{esc(r.get('device') or '?')}</td></tr>")
        parts.append("</table>")
    if sp.unmeasured and not sp.no_gpu:
        parts.append("<p>Not measured:</p><table><tr><th>student</th><th>why</th></tr>" +
                     "".join(f"<tr><td>{esc(n)}</td><td>{reason_html(w)}</td></tr>" for n, w in sp.unmeasured)
                     + "</table>")
    return "\n".join(parts)


def write(report: ClassReport, out: Path) -> Path:
    """Write report.html and its PNGs into ``out``; the page's path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("speed_*.png"), out / "points.png"]:      # this page's figures from an earlier run
        old.unlink(missing_ok=True)
    h = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Class report: "
         f"{esc(report.assignment)}</title><style>{CSS}</style></head><body>"]
    h.append(f"<h1>Class report: {esc(report.assignment)}</h1>")
    devices = report.devices
    dev_text = "; ".join(f"{d} ({n} student{'s' if n != 1 else ''})" for d, n in devices.most_common()) or "none recorded"
    graded = ", ".join(report.graded_dates) or "unknown"
    with_grading = sum(s.grading for s in report.students)
    h.append("<table class=\"meta\">"
             f"<tr><td>assignment</td><td>{esc(report.assignment)}</td></tr>"
             f"<tr><td>graded</td><td>{esc(graded)}</td></tr>"
             f"<tr><td>device(s)</td><td>{esc(dev_text)}</td></tr>"
             f"<tr><td>students</td><td>{len(report.students)} ({with_grading} graded by the judge)</td></tr>"
             f"<tr><td>report written</td><td>{esc(report.written)}</td></tr>"
             f"<tr><td>course</td><td><code>{esc(Path(report.course).name)}</code> (paths on this page are "
             "relative to it)</td></tr></table>")
    h.append("<p class=\"note\">Points are the gradebook's (nbgrader). Reasons, notes and speed figures come from "
             "each student's <code>grading.json</code>, which the instructor's process wrote while its judge "
             "graded; nothing a learner's notebook printed is read. Reference fractions: "
             f"<code>{esc(shown(report.scoreboard, report.course))}</code>.</p>")
    h.append("<p>Sections: <a href=\"#points\">points</a> · <a href=\"#students\">per student</a> · "
             "<a href=\"#speed\">speed</a> · <a href=\"#not-graded\">did not grade</a></p>")
    if report.disagreements:
        h.append("<div class=\"warn\" id=\"disagreements\"><b>The gradebook and the judge's record disagree</b> "
                 "(the gradebook's points are shown):<ul>" +
                 "".join(f"<li>{esc(s)}: {esc(nb)} {esc(g)}: {esc(t)}</li>" for s, nb, g, t in report.disagreements)
                 + "</ul></div>")
    h.append(_points(report, out))
    h.append(_students(report))
    h.append("<h2 id=\"speed\">Speed</h2>")
    h.append("<p class=\"note\">Each speed cell's figure is a fraction of a peer (the copy bandwidth, cuBLAS, torch's "
             "op) that the judge measured in the same task on the same GPU. Full points at the target, none at "
             "the floor, linear in between.</p>")
    h += [speed_section(sp, out) for sp in report.speeds] or ["<p>This assignment has no speed cells.</p>"]
    h.append(_not_graded(report))
    h.append("</body></html>")
    path = out / "report.html"
    path.write_text("\n".join(h), encoding="utf-8")
    return path


def _points(report: ClassReport, out: Path) -> str:
    from .plot import class_points

    h = ["<h2 id=\"points\">Points</h2>"]
    graded = [s for s in report.students if s.cells]
    if graded:
        rows = [(s.name, s.total, s.max_total) for s in sorted(graded, key=lambda s: (-s.total, s.name))]
        fig = class_points(rows, title=f"{report.assignment}: points per student")
        h.append(_figure(out, "points.png", fig, "points per student: " + ", ".join(f"{n} {p:g}/{m:g}" for n, p, m in rows),
                         "Each student's points in the gradebook"))
    books = list(dict.fromkeys(nb for nb, _, _ in report.columns))
    h.append("<div class=\"wide\"><table class=\"matrix\"><tr><th rowspan=2>student</th><th rowspan=2>total</th>" +
             "".join(f"<th colspan={sum(1 for c in report.columns if c[0] == b)}>{esc(b)}</th>" for b in books) + "</tr><tr>" +
             "".join(f"<th>{esc(g)}</th>" for _, g, _ in report.columns) + "</tr>")
    for s in report.students:
        if not s.cells:
            h.append(f"<tr><td><a href=\"#student-{slug(s.name)}\">{esc(s.name)}</a></td><td colspan="
                     f"{len(report.columns) + 1}>not graded</td></tr>")
            continue
        cells = {(c.notebook, c.grade_id): c for c in s.cells}
        row = [f"<tr><td><a href=\"#student-{slug(s.name)}\">{esc(s.name)}</a></td>"
               f"<td class=\"num {level(s.total, s.max_total)}\">{s.total:g} / {s.max_total:g}</td>"]
        for b, g, _ in report.columns:
            c = cells.get((b, g))
            if c is None:
                row.append("<td></td>")
                continue
            flag = " †" if c.judged is not None and c.score is not None and abs(c.judged - c.score) > 1e-6 else ""
            row.append(f"<td class=\"num {level(c.points, c.max_score)}\">{c.points:g} / {c.max_score:g}{flag}</td>")
        h.append("".join(row) + "</tr>")
    h.append("</table></div>")
    if report.disagreements:
        h.append("<p class=\"note\">† the gradebook and the judge's grading.json disagree (see above).</p>")
    return "\n".join(h)


def _students(report: ClassReport) -> str:
    h = ["<h2 id=\"students\">Per student</h2>"]
    for s in report.students:
        h.append(f"<h3 id=\"student-{slug(s.name)}\">{esc(s.name)}: {s.total:g} / {s.max_total:g}</h3>")
        if not s.cells:
            h.append("<p>Not graded (see <a href=\"#not-graded\">did not grade</a>).</p>")
            continue
        where = f" on {s.device}" if s.device else (" in Numba's CUDA simulator (no GPU)" if s.simulator else "")
        if s.graded_at:
            h.append(f"<p class=\"note\">graded {esc(s.graded_at.replace('T', ' '))}{esc(where)}</p>")
        h.append("<table><tr><th>notebook</th><th>cell</th><th>points</th><th>why points were lost</th></tr>")
        for c in s.cells:
            h.append(f"<tr><td>{esc(c.notebook)}</td><td>{esc(c.grade_id)}</td><td class=\"num {level(c.points, c.max_score)}\">"
                     f"{c.points:g} / {c.max_score:g}{' (manual)' if c.manual else ''}</td><td>{reason_html(c.reason)}</td></tr>")
        h.append("</table>")
        if s.notes:
            h.append("<p>Notes from the judge:</p><ul>" + "".join(f"<li>{reason_html(n)}</li>" for n in s.notes) + "</ul>")
    return "\n".join(h)


def _not_graded(report: ClassReport) -> str:
    h = ["<h2 id=\"not-graded\">Did not grade</h2>"]
    if not report.not_graded:
        h.append("<p>Every student's every notebook was graded.</p>")
    else:
        h.append("<table class=\"not-graded\"><tr><th>student</th><th>notebook</th><th>what</th><th>why</th>"
                 "<th>the judge's notes</th></tr>")
        for student, nb, status, why, notes in report.not_graded:
            h.append(f"<tr><td>{esc(student)}</td><td>{esc(nb)}</td><td>{esc(status)}</td><td>{reason_html(why)}</td>"
                     f"<td>{'<br>'.join(reason_html(n) for n in notes)}</td></tr>")
        h.append("</table>")
    if report.raised:
        h.append("<p>Graded, but an answer cell raised (the cells that needed it scored 0):</p><table><tr>"
                 "<th>student</th><th>note</th></tr>" +
                 "".join(f"<tr><td>{esc(s)}</td><td>{reason_html(n)}</td></tr>" for s, n in report.raised) + "</table>")
    return "\n".join(h)
