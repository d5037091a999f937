"""Checkpoints: atomic writes, the previous good one kept and used when the newest is damaged."""
import pytest
import torch

from course_utils import checkpoints
from course_utils.files import atomic_save, atomic_write_text


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
    payload = checkpoints.load(path, required=("model", "step"), log=logs.append)
    assert payload["step"] == 10
    assert len(logs) == 1 and "checkpoint.pt is truncated or corrupted" in logs[0] and "checkpoint.prev.pt" in logs[0]


def test_no_readable_checkpoint_is_one_clear_error(tmp_path):
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(b"junk")
    checkpoints.previous_path(path).write_bytes(b"junk too")
    with pytest.raises(checkpoints.CheckpointError, match="truncated or corrupted.*Delete the file"):
        checkpoints.load(path)
    with pytest.raises(checkpoints.CheckpointError, match="no checkpoint"):
        checkpoints.load(tmp_path / "none.pt")


def test_rng_state_round_trip():
    state = checkpoints.rng_state()
    a = torch.rand(3)
    checkpoints.set_rng_state(state)
    assert torch.equal(torch.rand(3), a)


def test_average_state_dicts():
    a, b = {"w": torch.ones(2), "n": torch.tensor(3)}, {"w": torch.zeros(2), "n": torch.tensor(3)}
    avg = checkpoints.average_state_dicts([a, b])
    assert torch.equal(avg["w"], torch.full((2,), 0.5)) and avg["n"] == 3
