"""Measure catalogues of learner slips against the checks: the full sweep, or one new catalogue before any check
is changed for it.

    python tools/measure_slips.py --all                  # every catalogue in tests/fresh_slips, 16 seed offsets
    python tools/measure_slips.py --all --record         # ... and write tests/fresh_slips/sweep.json
    python tools/measure_slips.py --all --if-changed     # only if the checks, the catalogues or torch changed since
                                                         # the recorded sweep (CI runs this, with --strict)
    python tools/measure_slips.py tests/fresh_slips/lesson12g.py [more] [--offsets 16]

A catalogue is a module like tests/fresh_slips/lesson12g.py: SLIPS and CORRECT, lists of (exercise, name,
function) for lesson NN (its file name starts with lessonNN); names starting "u: " are unusual slips. Each slip
and right answer is checked under the first --offsets of 16 seed offsets (0..7, then 8 drawn once): a slip is
named, bare, inconsistent or accepted (tests/fresh_slips/naming.py: by the KEY each offset names, mistakes.py),
a right answer passes or is REJECTED. The sweep prints one line per slip with its key, then the counts per
lesson; --strict exits 1 if any slip is not named or any right answer is rejected. The record holds the counts,
each slip's key, and the fingerprint of what the sweep depends on (course_utils/checks/ without the grader, the
catalogues, torch's version): `--if-changed` does nothing while it matches, so that no change to a check lands
unmeasured and an unchanged one costs nothing. docs/development.md's table is the record's (`--markdown`).
"""
import argparse
import collections
import hashlib
import importlib
import importlib.util
import json
import multiprocessing
import os
import platform
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATALOGUES = ROOT / "tests" / "fresh_slips"
RECORD = CATALOGUES / "sweep.json"
OFFSETS = list(range(8)) + random.Random(20240611).sample(range(1000, 10**6), 8)   # those the figures were made with
sys.path.insert(0, str(ROOT))


def fingerprint():
    """What a sweep's result depends on: the checks' code (not the grader's), the catalogues, torch's version."""
    import torch

    digest = hashlib.sha256(f"torch {torch.__version__}\n".encode())
    checks = ROOT / "course_utils" / "checks"
    files = [p for p in checks.rglob("*.py") if "grading" not in p.relative_to(checks).parts]
    files += list(CATALOGUES.glob("*.py"))
    for path in sorted(files):
        digest.update(f"{path.relative_to(ROOT).as_posix()}\n".encode() + path.read_bytes() + b"\n")
    return digest.hexdigest()


def load(path):
    spec = importlib.util.spec_from_file_location(f"tests.fresh_slips.{Path(path).stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lesson_of(path):
    found = re.match(r"lesson(\d\d)", Path(path).name)
    if not found:
        sys.exit(f"{path}: a catalogue's file name starts with lessonNN (the lesson it is for)")
    return found[1]


_MODULES = {}


def judge(job):
    """One slip or right answer under `offsets` seed offsets: (job, result, key)."""
    import torch

    from tests.fresh_slips.naming import name, verdict

    torch.set_num_threads(1)
    path, kind, index, offsets = job
    if path not in _MODULES:
        _MODULES[path] = load(path)
    module = _MODULES[path]
    items = module.SLIPS + getattr(module, "NOT_YET_NAMED", []) if kind == "slip" else module.CORRECT
    exercise, _, answer = items[index]
    check = getattr(importlib.import_module(f"course_utils.checks.lesson{lesson_of(path)}"), exercise)
    outcomes = [check.evaluate(answer, seed_offset=k) for k in OFFSETS[:offsets]]
    if kind == "right":
        rejected = [o for o in outcomes if not o.passed]
        return job, "passes" if not rejected else "REJECTED", rejected[0].message[:200] if rejected else ""
    result = verdict(outcomes)
    return job, result, "" if result == "accepted" else name(outcomes[0])


def jobs_of(paths, offsets):
    for path in paths:
        module = load(path)
        slips = module.SLIPS + getattr(module, "NOT_YET_NAMED", [])
        yield from ((str(path), "slip", i, offsets) for i in range(len(slips)))
        yield from ((str(path), "right", i, offsets) for i in range(len(module.CORRECT)))


def sweep(paths, offsets, jobs):
    """{lesson: Counter}, [(catalogue, kind, exercise, name, result, key)], in the catalogues' order."""
    work = list(jobs_of(paths, offsets))
    names = {}
    for path in paths:
        module = load(path)
        names[str(path), "slip"] = module.SLIPS + getattr(module, "NOT_YET_NAMED", [])
        names[str(path), "right"] = module.CORRECT
    if jobs > 1:
        with multiprocessing.get_context("forkserver").Pool(jobs) as pool:
            results = list(pool.imap(judge, work, chunksize=4))
    else:
        results = [judge(job) for job in work]
    counts, lines = collections.defaultdict(collections.Counter), []
    for (path, kind, index, _), result, key in results:
        exercise, name, _ = names[path, kind][index]
        lesson = lesson_of(path)
        if kind == "slip":
            counts[lesson][result] += 1
            counts[lesson]["unusual " + result if name.startswith("u:") else "textbook " + result] += 1
        else:
            counts[lesson]["right " + result] += 1
        lines.append((Path(path).stem, kind, exercise, name, result, key))
        print(f"{kind:5s} {result:12s} {Path(path).stem:10s} {exercise:26s} {name}   [{key}]", flush=True)
    return counts, lines


def table(counts):
    """The counts per lesson, as a markdown table (docs/development.md shows the record's)."""
    lessons = sorted(counts)
    rows = [("slips named", "named"), ("bare", "bare"), ("named differently by offset", "inconsistent"),
            ("accepted", "accepted"), ("right answers passing", "right passes"), ("right answers rejected",
                                                                                "right REJECTED")]
    out = ["| lesson | " + " | ".join(lessons) + " | all |", "|---|" + "---|" * (len(lessons) + 1)]
    for label, key in rows:
        values = [counts[lesson].get(key, 0) for lesson in lessons]
        out.append(f"| {label} | " + " | ".join(str(v) for v in values) + f" | {sum(values)} |")
    return "\n".join(out)


def summary(counts):
    slips = sum(c[k] for c in counts.values() for k in ("named", "bare", "inconsistent", "accepted"))
    named = sum(c["named"] for c in counts.values())
    rights = sum(c["right passes"] + c["right REJECTED"] for c in counts.values())
    rejected = sum(c["right REJECTED"] for c in counts.values())
    return slips, named, rights, rejected


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("catalogues", nargs="*")
    parser.add_argument("--all", action="store_true", help="every catalogue in tests/fresh_slips")
    parser.add_argument("--offsets", type=int, default=16, help="seed offsets per slip (at most 16)")
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="processes")
    parser.add_argument("--record", action="store_true", help=f"write {RECORD.relative_to(ROOT)} (with --all)")
    parser.add_argument("--if-changed", action="store_true", help="do nothing when the record is up to date")
    parser.add_argument("--strict", action="store_true", help="exit 1 unless every slip is named, every right passes")
    parser.add_argument("--markdown", action="store_true", help="print the record's table and stop")
    args = parser.parse_args(argv)
    if args.markdown:
        print(table({k: collections.Counter(v) for k, v in json.loads(RECORD.read_text())["lessons"].items()}))
        return 0
    if args.all:
        args.catalogues = sorted(CATALOGUES.glob("lesson*.py"))
    if not args.catalogues:
        parser.error("name catalogues, or --all")
    if args.if_changed:
        if not args.all:
            parser.error("--if-changed goes with --all")
        recorded = json.loads(RECORD.read_text()) if RECORD.exists() else {}
        if recorded.get("fingerprint") == fingerprint():
            print(f"the sweep of the catalogues is up to date ({RECORD.relative_to(ROOT)}: "
                  f"{recorded['named']} of {recorded['slips']} slips named, {recorded['right_passing']} of "
                  f"{recorded['right']} right answers passing); nothing to run")
            return 0
        print("the checks, the catalogues or torch changed since the recorded sweep: sweeping", flush=True)
    start = time.time()
    counts, lines = sweep([Path(p) for p in args.catalogues], min(args.offsets, len(OFFSETS)), max(1, args.jobs))
    slips, named, rights, rejected = summary(counts)
    print(table(counts))
    for group in ("textbook", "unusual"):
        total = sum(c[f"{group} {r}"] for c in counts.values() for r in ("named", "bare", "inconsistent", "accepted"))
        print(f"{group}: {sum(c[group + ' named'] for c in counts.values())} of {total} named, "
              f"{sum(c[group + ' accepted'] for c in counts.values())} accepted, "
              f"{sum(c[group + ' bare'] for c in counts.values())} bare, "
              f"{sum(c[group + ' inconsistent'] for c in counts.values())} inconsistent")
    seconds = time.time() - start
    print(f"{named} of {slips} slips named, {rights - rejected} of {rights} right answers passing; "
          f"{seconds:.0f} s with {args.jobs} process(es) on {platform.processor() or platform.machine()}")
    if args.record and args.all:
        import torch
        RECORD.write_text(json.dumps({
            "fingerprint": fingerprint(), "torch": torch.__version__, "offsets": min(args.offsets, len(OFFSETS)),
            "slips": slips, "named": named, "right": rights, "right_passing": rights - rejected,
            "lessons": {lesson: dict(sorted(c.items())) for lesson, c in sorted(counts.items())},
            "keys": {f"{cat}/{kind}/{exercise}/{name}": (result if result != "named" else key)
                     for cat, kind, exercise, name, result, key in lines}}, indent=1, ensure_ascii=False) + "\n")
        print(f"recorded in {RECORD.relative_to(ROOT)}")
    if args.strict and (named < slips or rejected):
        print(f"not every slip is named ({slips - named} not) or a right answer is rejected ({rejected})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
