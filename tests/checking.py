"""Helpers for the check tests: what a learner sees when a check meets an unfinished exercise."""
import contextlib
import io


@contextlib.contextmanager
def prints_not_implemented():
    """The block runs a check on a stub: it must print the one-line notice and raise nothing."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        yield out
    text = out.getvalue()
    assert "not implemented yet" in text and text.count("\n") == 1, f"expected the one-line notice, got {text!r}"
