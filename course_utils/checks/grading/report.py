"""What the grader writes: its rows (one per exercise; the CSV is gradebook.py's) and the table it prints.

Every text a learner controls (a folder's name, a message quoting their exception) is written so
that it stays one cell of one row: control characters (line breaks, tabs) in names are shown as
escapes (`\\n`), and a cell that a spreadsheet would read as a formula (starting with =, +, -, @,
a tab or a carriage return) is prefixed with an apostrophe. What the grader prints goes through
`printable`: no escape sequence, line break or bidirectional control in a file name reaches the terminal.
A name that is not UTF-8 (bytes Python keeps as lone surrogates) is shown with its bytes as \\xNN, so the CSV
and the terminal can always be written. A message (a learner's exception, quoted by the check) keeps its line
breaks and tabs, but no other control character reaches the CSV: it is shown as \\xNN.
"""
from typing import NamedTuple

OUTCOMES = ("passed", "wrong", "copied", "not implemented", "missing", "timeout", "error")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")


class Row(NamedTuple):
    learner: str
    lesson: str
    exercise: str
    outcome: str
    message: str


def _unsafe(char):
    code = ord(char)
    return (code < 32 or code == 127 or 0x80 <= code < 0xA0 or 0x2028 <= code <= 0x202E or 0x2066 <= code <= 0x2069
            or code == 0x200E or code == 0x200F or code == 0x061C or 0xD800 <= code <= 0xDFFF)


def _escape(char):
    """A character that must not be written as it is: \\xNN (a byte of a non-UTF-8 name: its own byte), \\uNNNN."""
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:   # (os.fsdecode's surrogateescape: the byte it could not decode)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 256 else f"\\u{code:04x}"


def printable(text):
    """`text` as the terminal may show it: control characters (escape sequences, line breaks, carriage
    returns, bidirectional overrides) and the undecodable bytes of a name as \\xNN / \\uNNNN."""
    return "".join(_escape(c) if _unsafe(c) else c for c in str(text))


def one_line(text):
    """`text` with its control characters shown as escapes (a name stays on one line)."""
    out = []
    for char in str(text):
        if char == "\\":
            out.append("\\\\")
        elif char in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[char])
        elif (ord(char) < 32 or ord(char) == 127 or 0x2028 <= ord(char) <= 0x2029 or 0x80 <= ord(char) < 0xA0
              or 0xD800 <= ord(char) <= 0xDFFF):
            out.append(_escape(char))
        else:
            out.append(char)
    return "".join(out)


def message_text(text):
    """A message as the CSV keeps it: its line breaks and tabs, no other control character (a learner's
    exception could carry an escape sequence to whoever shows the CSV in a terminal), nothing that is not
    UTF-8."""
    return "".join(_escape(c) if _unsafe(c) and c not in "\n\t" else c for c in str(text))


def summary_table(rows):
    """Learners down, lessons across (passed/total), and the total."""
    lessons = sorted({r.lesson for r in rows})
    learners = sorted({r.learner for r in rows})
    count = {}
    for r in rows:
        done, total = count.get((r.learner, r.lesson), (0, 0))
        count[(r.learner, r.lesson)] = (done + (r.outcome == "passed"), total + 1)
    shown = {learner: one_line(learner) for learner in learners}
    width = max([len("learner")] + [len(name) for name in shown.values()])
    lines = [f"{'learner':<{width}}  " + "  ".join(f"{lesson:>5}" for lesson in lessons) + "    total"]
    for learner in learners:
        marks = [count.get((learner, lesson)) for lesson in lessons]
        done = sum(m[0] for m in marks if m)
        total = sum(m[1] for m in marks if m)
        lines.append(f"{shown[learner]:<{width}}  " + "  ".join(f"{(f'{m[0]}/{m[1]}' if m else '-'):>5}" for m in marks)
                     + f"  {done:>3}/{total:<3}")
    return "\n".join(lines)
