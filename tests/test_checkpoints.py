"""Checkpoints: atomic writes, verified before they count, the previous good one kept and used when the
newest is damaged, and never replaced by a damaged one."""
import pytest
import torch

from course_utils.files import atomic_save, atomic_write_text
from course_utils.pipeline import checkpoints


def test_atomic_save_keeps_the_old_file_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    atomic_save({"a": 1}, path)

    def broken(obj, f):
        f.write(b"half")
        raise OSError("disk full")
    monkeypatch.setattr(torch, "save", broken)
    with pytest.raises(OSError):
        atomic_save({"a": 2}, path)
    monkeypatch.undo()
    assert torch.load(path) == {"a": 1} and [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_atomic_write_text(tmp_path):
    atomic_write_text("é", tmp_path / "sub" / "a.txt")
    assert (tmp_path / "sub" / "a.txt").read_text(encoding="utf-8") == "é"


def test_save_keeps_the_previous_checkpoint(tmp_path):
    path = tmp_path / "checkpoint.pt"
    checkpoints.save({"model": 1}, path)
    checkpoints.save({"model": 2}, path)
    assert torch.load(path, weights_only=False)["model"] == 2
    assert torch.load(checkpoints.previous_path(path), weights_only=False)["model"] == 1


@pytest.mark.parametrize("damage", ["truncate", "garbage", "not a checkpoint"])
def test_a_damaged_checkpoint_falls_back_to_the_previous_one_with_one_warning(tmp_path, damage):
    path = tmp_path / "checkpoint.pt"
    checkpoints.save({"model": 1, "step": 10}, path)
    checkpoints.save({"model": 2, "step": 20}, path)
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(b"\x00" * 100)
    else:
        torch.save({"something": "else"}, path)
    logs = []
    payload, used = checkpoints.load(path, required=("model", "step"), log=logs.append)
    assert payload["step"] == 10 and used == checkpoints.previous_path(path)
    assert len(logs) == 1 and "checkpoint.pt is truncated or corrupted" in logs[0] and "checkpoint.prev.pt" in logs[0]


def test_no_readable_checkpoint_is_one_clear_error(tmp_path):
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(b"junk")
    checkpoints.previous_path(path).write_bytes(b"junk too")
    with pytest.raises(checkpoints.CheckpointError, match="truncated or corrupted.*Delete the file"):
        checkpoints.load(path)
    with pytest.raises(checkpoints.CheckpointError, match="no checkpoint"):
        checkpoints.load(tmp_path / "none.pt")


def kill_during(monkeypatch, function_name, module):
    """Make the next call of module.function_name die the way a SIGKILL would leave things: nothing after it."""
    def killed(*args, **kwargs):
        raise SystemExit("killed")
    monkeypatch.setattr(module, function_name, killed)


def test_after_resuming_from_prev_a_save_killed_midway_leaves_the_good_checkpoint(tmp_path, monkeypatch):
    """checkpoint.pt damaged -> resume from checkpoint.prev.pt -> the first save must not move the damaged
    file over the good .prev: killed in the middle of that save, a usable checkpoint must remain."""
    path = tmp_path / "checkpoint.pt"
    checkpoints.save({"model": 1, "step": 10}, path)
    checkpoints.save({"model": 2, "step": 20}, path)
    path.write_bytes(path.read_bytes()[:40])                       # checkpoint.pt damaged
    payload, used = checkpoints.load(path, required=("model", "step"), log=lambda *a: None)
    assert payload["step"] == 10 and used.name == "checkpoint.prev.pt"

    kill_during(monkeypatch, "save", torch)                        # killed while writing the new one
    with pytest.raises(SystemExit):
        checkpoints.save({"model": 3, "step": 30}, path)
    monkeypatch.undo()
    payload, used = checkpoints.load(path, required=("model", "step"), log=lambda *a: None)
    assert payload["step"] == 10, "the good checkpoint was lost"

    checkpoints.save({"model": 3, "step": 30}, path)               # the save goes through: the damaged one goes
    assert torch.load(path, weights_only=False)["step"] == 30
    assert torch.load(checkpoints.previous_path(path), weights_only=False)["step"] == 10
    checkpoints.save({"model": 4, "step": 40}, path)               # from now on the usual rotation
    assert torch.load(checkpoints.previous_path(path), weights_only=False)["step"] == 30
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith((".part", ".new"))]


@pytest.mark.parametrize("kill_at", [1, 2])
def test_a_save_killed_between_its_renames_leaves_a_complete_checkpoint(tmp_path, monkeypatch, kill_at):
    import os
    path = tmp_path / "checkpoint.pt"
    checkpoints.save({"model": 1, "step": 10}, path)
    checkpoints.save({"model": 2, "step": 20}, path)
    calls, real = [], os.replace

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == 1 + kill_at:                              # 1: atomic_open's own rename
            raise SystemExit("killed")
        return real(src, dst)
    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(SystemExit):
        checkpoints.save({"model": 3, "step": 30}, path)
    monkeypatch.undo()
    payload, _ = checkpoints.load(path, required=("model", "step"), log=lambda *a: None)
    assert payload["step"] == 20


def test_a_checkpoint_that_does_not_read_back_is_refused_and_the_old_one_kept(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    checkpoints.save({"model": 1, "step": 10}, path)
    monkeypatch.setattr(torch, "save", lambda obj, f: f.write(b"not a checkpoint"))
    with pytest.raises(checkpoints.CheckpointError, match="does not read back"):
        checkpoints.save({"model": 2, "step": 20}, path)
    monkeypatch.undo()
    assert checkpoints.load(path)[0]["step"] == 10


def test_rng_state_round_trip():
    state = checkpoints.rng_state()
    a = torch.rand(3)
    checkpoints.set_rng_state(state)
    assert torch.equal(torch.rand(3), a)


def test_average_state_dicts():
    a, b = {"w": torch.ones(2), "n": torch.tensor(3)}, {"w": torch.zeros(2), "n": torch.tensor(3)}
    avg = checkpoints.average_state_dicts([a, b])
    assert torch.equal(avg["w"], torch.full((2,), 0.5)) and avg["n"] == 3
