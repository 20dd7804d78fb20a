"""Where a kernel's FFMAs stall, from Nsight Compute's source page (--page source --csv --print-source sass):
their share of all stall samples, their reasons, and the FFMAs one by one; then the kernel's top
instructions. Used on 05.04 FP8's promotion (96 FFMAs per consumer and k tile).

    python dev/ch05_hopper/ffma_stalls.py SOURCE.csv [N]     # N: how many FFMAs to list (default 12)
"""
from __future__ import annotations

import re
import sys
from collections import Counter

from fp8attn_stalls import kernels, num    # the source page's reader (this folder)

SAMPLES = "Warp Stall Sampling (All Samples)"


def main(path: str, n: int = 12) -> None:
    for name, rows in kernels(path).items():
        print(f"== {name}")
        summarize(rows, n)


def summarize(rows: list[dict], n: int) -> None:
    reasons = [c for c in rows[0] if c.startswith("stall_") and "Not Issued" not in c]
    total = sum(num(r[SAMPLES]) for r in rows)

    def line(r, tot):
        s = num(r[SAMPLES])
        top = sorted(((num(r[c]), c[6:]) for c in reasons), reverse=True)[:3]
        return (f"{100 * s / tot:5.1f}% {r['Instructions Executed']:>9s}  {r['Source'][:68]:68s} "
                + ", ".join(f"{k} {100 * v / max(s, 1):.0f}%" for v, k in top if v))

    ffma = [r for r in rows if re.match(r"^\s*(@\S+\s+)?FFMA", r["Source"])]
    fs = sum(num(r[SAMPLES]) for r in ffma)
    print(f"{len(rows)} SASS lines, {total:.0f} stall samples; {len(ffma)} FFMAs hold {100 * fs / total:.1f}% of them")
    by = Counter({c[6:]: sum(num(r[c]) for r in ffma) for c in reasons})
    print("FFMAs by reason: " + ", ".join(f"{k} {100 * v / fs:.1f}%" for k, v in by.most_common(6)))
    for r in ffma[:n]:
        print("  " + line(r, fs))
    by = Counter({c[6:]: sum(num(r[c]) for r in rows) for c in reasons})
    print("all by reason: " + ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in by.most_common(10)))
    for r in sorted(rows, key=lambda r: -num(r[SAMPLES]))[:12]:
        print("  " + line(r, total))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 12)
