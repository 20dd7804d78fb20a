"""Lesson 05.08 (FP8 attention): a warp's instructions on a key tile's common path, counted in the machine code (no GPU).

The consumer loop is the innermost backward branch around the register-A QGMMAs (P V); its basic blocks minus
the cold ones -- a barrier wait's retry (its try again, its clock reads), O's rescale (>= 32 FMUL), the masking (>= 32 FSEL with
ISETP), the quad's max when it moves (SHFL) -- are what a warp issues on a tile with no mask and no new max
whose waits succeed at once (the signaller's arrivals counted for every warp). Per tile: the loop's count over
its tiles (S's QGMMA with gsb0). Variants of the cell were compared with it before any GPU run:

    LD_PRELOAD=<nvrtc 13.0.48 lib>/libnvrtc.so.13 python dev/ch05_hopper/fp8attn_hotpath.py [CELL.cu|- [KERNEL...]]

(the device compiles with NVRTC 13.0; tests/test_nvrtc_13_0.py says where CI gets that library.) Defaults:
the lesson's cell (solutions/05_hopper_blackwell/08_flash3_fp8.ipynb, v_flash3_fp8; "-" for it too), F8<0, 1, 1>;
CELL.cu: a variant of that cell's text, %%cuda line included. It reads a two-buffer loop (two tiles an
iteration), the cell's since 2026-11-25.
"""
from __future__ import annotations

import os
import re
import sys
from collections import Counter
from pathlib import Path

os.environ.setdefault("GRADER_FORCE_SIM", "1")
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
NB = ROOT / "solutions" / "05_hopper_blackwell" / "08_flash3_fp8.ipynb"

_BRA = re.compile(r"BRA (?:\S+, )?0x([0-9a-f]+)")
_OP = re.compile(r"^@!?U?P\w+ ")


def _op(text: str) -> str:
    return _OP.sub("", text).split()[0].split(".")[0]


def _parse(sass_text: str):
    out = []
    for line in sass_text.splitlines():
        m = re.match(r"/\*([0-9a-f]+)\*/ (.*)", line)
        if m:
            out.append((int(m.group(1), 16), m.group(2)))
    return out


def _loop(ins):
    best = None
    for a, t in ins:
        m = _BRA.search(t)
        if m and int(m.group(1), 16) < a:
            lo = int(m.group(1), 16)
            if any(lo <= b <= a and "QGMMA.64x128" in u and ", R" in u.split("gdesc")[0] for b, u in ins) \
                    and (best is None or a - lo < best[1] - best[0]):
                best = (lo, a)
    return best


def _blocks(ins, lo, hi):
    targets = {int(m.group(1), 16) for _, t in ins for m in [_BRA.search(t)] if m}
    out, cur = [], []
    for a, t in ins:
        if not lo <= a <= hi:
            continue
        if a in targets and cur:
            out.append(cur)
            cur = []
        cur.append((a, t))
        if "BRA" in t:
            out.append(cur)
            cur = []
    return out + ([cur] if cur else [])


def _cold(block) -> bool:
    c, text = Counter(_op(t) for _, t in block), " ".join(t for _, t in block)
    retry = len(block) <= 3 and "TRYWAIT" in text and block[-1][1].startswith("@!P")   # try again, branch back
    return ("SR_CLOCKLO" in text or retry or c["FMUL"] >= 32 or (c["FSEL"] >= 32 and c["ISETP"] >= 16)
            or c["SHFL"] >= 2)


def hot_path(sass_text: str) -> tuple[float, Counter]:
    """(instructions a tile, opcode counts a tile) of the consumer loop's common path."""
    ins = _parse(sass_text)
    lo, hi = _loop(ins)
    blocks = _blocks(ins, lo, hi)
    tiles = sum(1 for b in blocks for _, t in b if t.startswith("QGMMA") and "gdesc" in t.split(",")[1] and "gsb0" in t)
    tot = Counter(_op(t) for b in blocks if not _cold(b) for _, t in b)
    return sum(tot.values()) / tiles, Counter({k: v / tiles for k, v in tot.items()})


def main():
    from cuda.bindings import nvrtc
    from grader.cuda import sass
    from grader.notebooks import cell_source
    from tests.cells import compile_cell

    given = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] != "-" else None
    kerns = sys.argv[2:] or ["flash3_fp8<F8<0, 1, 1>>"]
    text = Path(given).read_text() if given else cell_source(NB, "v_flash3_fp8")
    first, _, body = text.partition("\n")
    first = re.sub(r' -k "[^"]*"', "", first) + "".join(f' -k "{k}"' for k in kerns)
    m = compile_cell(first + "\n" + body, "hotpath")
    print(f"NVRTC {'.'.join(map(str, nvrtc.nvrtcVersion()[1:]))}, {given or NB.name + ' v_flash3_fp8'}")
    for k in kerns:
        n, ops = hot_path(sass.disassemble(m, k))
        top = " ".join(f"{o}:{v:g}" for o, v in ops.most_common(8))
        print(f"{k}: {n:.1f} instructions a tile | {top} | {m.resources.get(k)}")


if __name__ == "__main__":
    main()
