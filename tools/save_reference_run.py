"""Keep a finished run's report as the course's reference run (lesson 10 and the README quote it).

    python tools/save_reference_run.py runs/cpu/report.json     # -> course_utils/reference_runs/cpu.json
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__)
        return 2
    report = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    for key in ("preset", "steps", "bleu_beam", "examples", "command", "train_seconds", "threads"):
        if key not in report:
            print(f"error: {args[0]} is not a finished run's report.json (no {key!r})", file=sys.stderr)
            return 2
    target = ROOT / "course_utils" / "reference_runs" / f"{report['preset']}.json"
    target.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"written: {target.relative_to(ROOT)} (BLEU {report['bleu_beam']} with beam search, "
          f"{report['steps']} steps, {report['train_seconds'] / 60:.1f} min of training)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
