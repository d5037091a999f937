"""Measure a catalogue of learner slips against the checks, before any check is changed for it.

    python tools/measure_slips.py tests/fresh_slips/lesson12g.py [more catalogues] [--offsets 16]

A catalogue is a module like tests/fresh_slips/lesson12g.py: SLIPS and CORRECT, lists of (exercise, name,
function) for lesson NN (its file name starts with lessonNN); names starting "u: " are unusual slips. Each slip
and right answer is checked under the first --offsets of 16 seed offsets (0..7, then 8 drawn once) and prints
one line: named, bare, inconsistent or accepted (tests/fresh_slips/naming.py says which), then the counts,
textbook and unusual apart. The before-fix figures of docs/development.md come from this measure, run at the
commit before each catalogue's fixes.
"""
import argparse
import collections
import importlib.util
import random
import re
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
OFFSETS = list(range(8)) + random.Random(20240611).sample(range(1000, 10**6), 8)   # those the figures were made with
sys.path.insert(0, str(ROOT))

from tests.fresh_slips.naming import verdict  # noqa: E402


def load(path):
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("catalogues", nargs="+")
    parser.add_argument("--offsets", type=int, default=16)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    counts = collections.Counter()
    for path in args.catalogues:
        lesson = re.match(r"lesson(\d\d)", Path(path).name)
        if not lesson:
            sys.exit(f"{path}: a catalogue's file name starts with lessonNN (the lesson it is for)")
        checks, module = importlib.import_module(f"course_utils.checks.lesson{lesson[1]}"), load(path)
        for kind, items in (("slip", module.SLIPS + getattr(module, "NOT_YET_NAMED", [])),
                            ("right", module.CORRECT)):
            for exercise, name, answer in items:
                check = getattr(checks, exercise)
                outcomes = [check.evaluate(answer, seed_offset=k) for k in OFFSETS[:args.offsets]]
                if kind == "right":
                    result = "passes" if all(o.passed for o in outcomes) else "REJECTED"
                else:
                    result = verdict(outcomes)
                    counts[("unusual" if name.startswith("u:") else "textbook", result)] += 1
                print(f"{kind:5s} {result:12s} {exercise:26s} {name}", flush=True)
    for group in ("textbook", "unusual"):
        total = sum(n for (g, _), n in counts.items() if g == group)
        print(f"{group}: {counts[group, 'named']} of {total} named, {counts[group, 'accepted']} accepted, "
              f"{counts[group, 'bare']} bare, {counts[group, 'inconsistent']} inconsistent")


if __name__ == "__main__":
    main()
