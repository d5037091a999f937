"""Render the course's diagrams to diagrams/png/<name>.png.

    python tools/draw_diagrams.py            # every diagram
    python tools/draw_diagrams.py 07_qkv ... # only these

Prints each file's size in pixels and bytes. The output is deterministic: the PNGs carry no
date or software metadata, so re-running on the same machine gives the same bytes.
"""
import argparse
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import diagrams  # noqa: E402
from diagrams.style import save_png  # noqa: E402

MAX_WIDTH_PX = 1000
MAX_BYTES = 90_000


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"diagrams to draw (default: all): {', '.join(diagrams.NAMES)}")
    args = parser.parse_args(argv)
    names = [n.removesuffix(".png") for n in args.names] or diagrams.NAMES
    unknown = [n for n in names if n not in diagrams.NAMES]
    if unknown:
        parser.error(f"unknown diagram(s): {', '.join(unknown)}; known: {', '.join(diagrams.NAMES)}")
    out = ROOT / "diagrams" / "png"
    out.mkdir(parents=True, exist_ok=True)
    too_big = []
    for name in names:
        fig = diagrams.draw(name)
        w, h, size = save_png(fig, out / f"{name}.png")
        flag = ""
        if w > MAX_WIDTH_PX or size > MAX_BYTES:
            flag = "  <-- larger than the budget"
            too_big.append(name)
        print(f"{name + '.png':28s} {w:4d} x {h:4d} px  {size / 1000:6.1f} KB{flag}")
    return 1 if too_big else 0


if __name__ == "__main__":
    sys.exit(main())
