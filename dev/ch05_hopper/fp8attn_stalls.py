"""Summarize ncu's source page (--page source --csv --print-source sass, one or more kernels in a file):
stall samples by reason, the instructions with the most samples, and executed instructions by class,
per 128x128 block of scores (the work of one CTA on one 128-key tile: B*H*(S/128)^2 blocks at S 4096).

    python dev/ch05_hopper/fp8attn_stalls.py SRC.csv [BLOCKS]     # BLOCKS default 4*32*32*32 = 131072
"""
from __future__ import annotations

import csv
import re
import sys
from collections import Counter, defaultdict

CLASSES = [("QGMMA/HGMMA", r"^(QGMMA|HGMMA)"), ("MUFU", r"^MUFU"), ("FFMA/FMUL/FADD", r"^(FFMA|FMUL|FADD)"),
           ("FMNMX", r"^FMNMX"), ("F2FP", r"^F2FP"), ("SHFL", r"^SHFL"), ("PRMT", r"^PRMT"), ("SEL/FSEL", r"^F?SEL"),
           ("LOP3/SHF/IMAD/IADD/MOV", r"^(LOP3|SHF|IMAD|IADD3|MOV|LEA|ISETP|FSETP|PLOP3|P2R|R2P|VIADD|IABS|I2F|F2I)"),
           ("WARPGROUP/BAR/SYNCS/VOTE", r"^(WARPGROUP|BAR|SYNCS|VOTE|WARPSYNC|UCGABAR|NANOSLEEP)"),
           ("branch", r"^(BRA|BSSY|BSYNC|EXIT|RET|CALL)"), ("uniform", r"^U"), ("memory", r"^(LD|ST|UTMA|RED|ATOM)")]


def kernels(path):
    out, cur, header = {}, None, None
    for row in csv.reader(open(path)):
        if row and row[0] == "Kernel Name":
            cur, header = re.sub(r"\(int\)", "", row[1]).split("(course")[0].replace("void ", ""), None
            out[cur] = []
        elif row and row[0] == "Address":
            header = row
        elif header and cur and len(row) == len(header):
            out[cur].append(dict(zip(header, row)))
    return out


def num(x):
    try:
        return float(x)
    except ValueError:
        return 0.0


def summarize(name, rows, blocks):
    reasons = [c for c in rows[0] if c.startswith("stall_") and "Not Issued" not in c]
    tot = sum(num(r["Warp Stall Sampling (All Samples)"]) for r in rows)
    print(f"== {name}: {tot:.0f} stall samples")
    by = Counter({c[6:]: sum(num(r[c]) for r in rows) for c in reasons})
    print("   by reason: " + ", ".join(f"{k} {100 * v / tot:.1f}%" for k, v in by.most_common(9)))
    cls = defaultdict(float)
    samp = defaultdict(float)
    for r in rows:
        op = r["Source"].split()[0] if r["Source"].split() else ""
        if op.startswith("@"):
            op = r["Source"].split()[1]
        for c, pat in CLASSES:
            if re.match(pat, op):
                break
        else:
            c = "other"
        cls[c] += num(r["Instructions Executed"])
        samp[c] += num(r["Warp Stall Sampling (All Samples)"])
    print("   warp instructions executed per 128x128 block (all 12 warps), and stall samples %, by class:")
    for c, _ in CLASSES + [("other", "")]:
        if cls[c]:
            print(f"     {c:26s} {cls[c] / blocks:8.1f}   {100 * samp[c] / tot:5.1f}%")
    print(f"     {'total':26s} {sum(cls.values()) / blocks:8.1f}")
    print("   top instructions by stall samples:")
    for r in sorted(rows, key=lambda r: -num(r["Warp Stall Sampling (All Samples)"]))[:22]:
        s = num(r["Warp Stall Sampling (All Samples)"])
        top = sorted(((num(r[c]), c[6:]) for c in reasons), reverse=True)[:3]
        print(f"     {100 * s / tot:5.1f}%  {r['Instructions Executed']:>9s}  {r['Source'][:60]:60s} "
              + ", ".join(f"{k} {100 * v / max(s, 1):.0f}%" for v, k in top if v))


if __name__ == "__main__":
    blocks = float(sys.argv[2]) if len(sys.argv) > 2 else 4 * 32 * 32 * 32
    for name, rows in kernels(sys.argv[1]).items():
        summarize(name, rows, blocks)
