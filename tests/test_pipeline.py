"""The course's training pipeline (course_utils/pipeline) with lesson 12's language model and with a third,
made-up task written as pipeline/task.py's docstring says: a run killed with SIGKILL resumes to the weights of
an uninterrupted one; the command line's refusals; a checkpoint whose weights do not fit falls back to the
previous one; a read-only folder and a full disk give one `error:` line and lose nothing.

A read-only folder and a full disk are real where this test may mount a small tmpfs (root, as in CI);
elsewhere the same failures are made by making the write raise EROFS / ENOSPC.
"""
import dataclasses
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from course_utils import files
from course_utils.language_model.__main__ import main as lm_main
from course_utils.language_model.presets import make_config
from course_utils.language_model.task import run
from course_utils.pipeline import checkpoints, cli, trainer
from course_utils.pipeline.runs import TrainingStopped
from course_utils.pipeline.task import RunConfig, Task

ROOT = Path(__file__).resolve().parents[1]
# lesson 12's command at a tiny size: 40 steps in rounds of 30, a checkpoint after every step, fp32 (a CPU
# without bf16 instructions emulates bf16 autocast very slowly)
LM = ["--preset", "fast", "--steps", "40", "--amp", "off", "--threads", "1", "--no-progress",
      "--checkpoint-minutes", "0"]


def weights(path):
    return torch.load(path, map_location="cpu", weights_only=False)["model"]


def assert_same_weights(a, b):
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    different = [k for k in wa if not torch.equal(wa[k], wb[k])]
    assert not different, f"{len(different)} tensors differ, e.g. {different[:3]}"


def stamps(folder):
    return {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in folder.iterdir()}


def command(out, *extra):
    return [sys.executable, "-m", "course_utils.language_model", *LM, "--out", str(out), *extra]


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    out = tmp_path_factory.mktemp("lm") / "straight"
    done = subprocess.run(command(out), capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr[-2000:]
    return out


# ---------------------------------------------------------------------------------------------
# Lesson 12's command: killed and resumed, refusals
# ---------------------------------------------------------------------------------------------
@pytest.mark.multi30k
def test_lm_killed_mid_run_resumes_to_the_weights_of_an_uninterrupted_run(straight, tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    killed = tmp_path / "killed"
    proc = subprocess.Popen(command(killed), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                seen = torch.load(killed / "checkpoint.pt", weights_only=False)
            except Exception:  # noqa: BLE001 - not written yet, or being renamed
                seen = None
            if seen and 8 <= seen["step"] < 30:                      # in the middle of the first round
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.02)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed mid-run"
    assert not (killed / "model.pt").exists()
    done = subprocess.run(command(killed, "--resume"), env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "resumed from" in done.stdout
    assert_same_weights(straight / "model.pt", killed / "model.pt")
    report, again = (json.loads((d / "report.json").read_text()) for d in (straight, killed))
    assert again["gpt_val_ppl"] == report["gpt_val_ppl"] and again["steps"] == report["steps"] == 40
    assert again["history"] == report["history"]
    assert not [p.name for p in killed.iterdir() if p.name.endswith(".part")], "a killed write left a temp file"


@pytest.mark.multi30k
def test_lm_repeated_command_without_resume_refuses(straight, capsys):
    before = stamps(straight)
    assert lm_main([*LM, "--out", str(straight)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "already holds a run" in err and "--resume" in err and "new --out" in err and "--overwrite" in err
    assert stamps(straight) == before, "the run's files were touched"


@pytest.mark.multi30k
def test_lm_resume_with_fewer_steps_than_done_refuses_in_one_line(straight, capsys):
    """Lesson 12: `--resume --steps N` with N below the 40 steps done would print "step 40 of 5" and rewrite
    report.json: refused in one line, as lesson 10 refuses fewer epochs, and nothing touched."""
    before = stamps(straight)
    assert lm_main([*LM[:2], *LM[4:], "--steps", "5", "--out", str(straight), "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot resume") and "it has done 40 steps, more than the 5 asked for" in err
    assert "--steps 40" in err and err.count("\n") == 1
    unchanged = lambda stamp: {k: v for k, v in stamp.items() if k != "tokenizer.json"}   # (rewritten as it was)
    assert unchanged(stamps(straight)) == unchanged(before), "the run's files were touched"


def test_induction_resume_with_fewer_steps_than_done_refuses_in_one_line(tmp_path, capsys):
    """Lesson 14, the same: 20 steps done, `--resume --steps 5` refused in one line; report.json unchanged."""
    from course_utils.induction_heads.__main__ import main as induction_main

    out = tmp_path / "run"
    common = ["--preset", "fast", "--threads", "1", "--no-progress", "--checkpoint-minutes", "0", "--out", str(out)]
    assert induction_main([*common, "--steps", "20"]) == 0
    capsys.readouterr()
    before = stamps(out)
    assert induction_main([*common, "--steps", "5", "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot resume") and "it has done 20 steps, more than the 5 asked for" in err
    assert err.count("\n") == 1 and stamps(out) == before
    assert induction_main([*common, "--steps", "20", "--resume"]) == 0   # as many as done: nothing more to do


def test_lm_resume_where_there_is_nothing_to_resume_refuses(tmp_path, capsys):
    start = time.perf_counter()
    assert lm_main([*LM, "--out", str(tmp_path / "none"), "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --resume: ") and "no checkpoint to go on with" in err and err.count("\n") == 1
    assert not (tmp_path / "none").exists() and time.perf_counter() - start < 5


@pytest.mark.parametrize("args, words", [
    (["--steps", "0"], "steps must be a whole number >= 1, got 0"),
    (["--batch-size", "15", "--accum-steps", "2"], "batch_size 15 cannot be split"),
    (["--lr", "-1"], "lr must be positive")])
def test_lm_impossible_settings_are_one_line_before_any_work(tmp_path, capsys, args, words):
    assert lm_main([*LM, "--out", str(tmp_path / "run"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------------------------------------
# Checkpoints whose weights do not fit the model
# ---------------------------------------------------------------------------------------------
def unusable(payload):
    """The same checkpoint, its weights of other shapes (the right keys, an unusable model)."""
    return {**payload, "model": {k: torch.zeros(3) for k in payload["model"]}}


@pytest.mark.multi30k
def test_a_checkpoint_whose_weights_do_not_fit_falls_back_to_the_previous_one(straight, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    shutil.copy(straight / "tokenizer.json", out / "tokenizer.json")
    previous = torch.load(straight / "checkpoint.prev.pt", weights_only=False)           # step 39: good
    assert previous["step"] == 39
    torch.save(previous, out / "checkpoint.prev.pt")
    torch.save(unusable(torch.load(straight / "checkpoint.pt", weights_only=False)), out / "checkpoint.pt")
    logs = []
    run(make_config("fast", steps=40, amp="off", threads=1, checkpoint_minutes=0), out, resume=True,
        show_progress=False, log=logs.append)
    warning = next(line for line in logs if line.startswith("warning:"))
    assert f"{out / 'checkpoint.pt'} does not fit the model" in warning and "previous checkpoint" in warning
    assert any(line.startswith(f"resumed from {out / 'checkpoint.prev.pt'}") for line in logs), logs
    assert_same_weights(straight / "model.pt", out / "model.pt")     # step 40 trained again, the same
    assert torch.load(out / "checkpoint.prev.pt", weights_only=False)["step"] == 39, \
        "the unusable checkpoint must never be kept as the previous one"


@pytest.mark.multi30k
def test_no_usable_checkpoint_is_one_line(straight, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    for name in ("checkpoint.pt", "checkpoint.prev.pt"):
        torch.save(unusable(torch.load(straight / name, weights_only=False)), out / name)
    before = stamps(out)
    assert lm_main([*LM, "--out", str(out), "--resume"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert "checkpoint.pt does not fit the model" in err and "checkpoint.prev.pt does not fit the model" in err
    assert {k: v for k, v in stamps(out).items() if k != "tokenizer.json"} == before, "the checkpoints were touched"


# ---------------------------------------------------------------------------------------------
# A read-only folder, a full disk: one line, nothing lost
# ---------------------------------------------------------------------------------------------
def _mount(where, options):
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                          capture_output=True).returncode == 0


@pytest.fixture
def small_disk(tmp_path):
    """(folder, real): a 2.5 MB tmpfs where one can be mounted (real), else a plain folder."""
    where = tmp_path / "small"
    real = _mount(where, "size=2560k")
    yield where, real
    if real:
        subprocess.run(["umount", str(where)], check=False)


@pytest.fixture
def read_only(tmp_path):
    where = tmp_path / "ro"
    real = _mount(where, "ro,size=1m")
    yield where, real
    if real:
        subprocess.run(["umount", str(where)], check=False)


@pytest.mark.multi30k
def test_a_read_only_folder_is_one_line(read_only, capsys, monkeypatch):
    where, real = read_only
    if not real:                                   # no mount here: the write fails as on a read-only mount
        def refuse(*args, **kwargs):
            raise OSError(errno.EROFS, "Read-only file system")
        monkeypatch.setattr(files.tempfile, "mkstemp", refuse)
    assert lm_main([*LM, "--out", str(where)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot write {where / 'tokenizer.json'}: the folder is on a read-only file system")
    assert err.count("\n") == 1 and "Errno" not in err and "Traceback" not in err


@pytest.mark.multi30k
def test_a_full_disk_is_one_line_and_the_last_checkpoint_is_kept(small_disk, capsys, monkeypatch):
    where, real = small_disk
    saves = []
    real_save = checkpoints.save

    def counting(*args, **kwargs):
        saves.append(1)
        if not real and len(saves) == 3:           # no tmpfs here: the third checkpoint meets a full disk
            def full(self, data):
                self.error = OSError(errno.ENOSPC, "No space left on device")
                raise self.error
            monkeypatch.setattr(files._Recording, "write", full)
        return real_save(*args, **kwargs)
    monkeypatch.setattr(checkpoints, "save", counting)
    assert lm_main([*LM, "--out", str(where)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot write {where / 'checkpoint.pt'}: the disk is full"), err
    assert err.count("\n") == 1 and "inline_container" not in err and "Traceback" not in err
    monkeypatch.undo()
    kept, used = checkpoints.load(where / "checkpoint.pt", required=trainer.REQUIRED)
    assert used.name == "checkpoint.pt" and kept["step"] == len(saves) - 1, "the last good checkpoint is kept"
    assert not [p.name for p in where.iterdir() if p.name.endswith((".part", ".new"))]


def test_describe_os_error_names_the_file_and_why():
    assert files.describe_os_error(OSError(errno.ENOSPC, "x", "runs/a/checkpoint.pt")).startswith(
        "cannot write runs/a/checkpoint.pt: the disk is full (errno 28)")
    assert "read-only" in files.describe_os_error(OSError(errno.EROFS, "x", "f"))


# ---------------------------------------------------------------------------------------------
# A third task, written as pipeline/task.py's docstring says (lesson 14 will add one so)
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class RepeatConfig(RunConfig):
    vocab_size: int = 16
    half_length: int = 6
    batch_size: int = 8
    steps_per_epoch: int = 5
    d_model: int = 16
    epochs: int = 3
    amp: str = "off"
    checkpoint_minutes: float = 0.0
    log_every: int = 1


class RepeatTask(Task):
    """A made-up task: random tokens, repeated once; a tiny model learns the next token."""
    name, command, Config, presets = "repeat", "python -m course_utils.translation", RepeatConfig, {"tiny": {}}

    def prepare(self, out_dir, saved=None, log=print):
        self.val = self.sequences(torch.Generator().manual_seed(10_000 + self.cfg.seed), 32)

    def sequences(self, gen, n):
        first = torch.randint(0, self.cfg.vocab_size, (n, self.cfg.half_length), generator=gen)
        return torch.cat([first, first], dim=1)

    def build_model(self):
        return torch.nn.Sequential(torch.nn.Embedding(self.cfg.vocab_size, self.cfg.d_model), torch.nn.Dropout(0.1),
                                   torch.nn.Linear(self.cfg.d_model, self.cfg.vocab_size))

    def batches(self, epoch):
        gen = torch.Generator().manual_seed(self.cfg.seed * 100_003 + epoch)
        return [self.sequences(gen, self.cfg.batch_size) for _ in range(self.cfg.steps_per_epoch)]

    def loss(self, model, tokens):
        logits = model(tokens[:, :-1])
        return F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten(), reduction="sum")

    def count(self, tokens):
        return tokens[:, 1:].numel()

    @torch.no_grad()
    def evaluate(self, model, history):
        tokens = self.val.to(self.device)
        per_position = F.cross_entropy(model(tokens[:, :-1]).float().transpose(1, 2), tokens[:, 1:],
                                       reduction="none").mean(0)
        return {"loss_per_position": per_position.tolist(), "val_loss": float(per_position.mean())}


def test_a_third_task_trains_stops_and_resumes_exactly(tmp_path, monkeypatch):
    cfg = RepeatTask.make_config("tiny")
    straight = run_task(cfg, tmp_path / "straight")
    calls, real = [], trainer.train_step

    def interrupt_at_step_7(state, *args):
        loss = real(state, *args)
        calls.append(1)
        if len(calls) == 7:
            signal.raise_signal(signal.SIGINT)     # Ctrl-C: the step ends, the checkpoint is saved
        return loss
    monkeypatch.setattr(trainer, "train_step", interrupt_at_step_7)
    with pytest.raises(TrainingStopped, match=r"stopped at step 7 of 15 \(epoch 2\)"):
        run_task(cfg, tmp_path / "stopped")
    monkeypatch.undo()
    again = run_task(cfg, tmp_path / "stopped", resume=True)
    assert_same_weights(tmp_path / "straight" / "model.pt", tmp_path / "stopped" / "model.pt")
    assert again["steps"] == straight["steps"] == 15 and again["epochs"] == 3
    history = json.loads((tmp_path / "stopped" / "history.json").read_text())
    assert len(history["loss_per_position"]) == 3 and len(history["loss_per_position"][0]) == 11
    assert history["step"] == list(range(1, 16))


def run_task(cfg, out, resume=False):
    return trainer.run(RepeatTask(cfg), out, resume=resume, show_progress=False, log=lambda *a: None)


def test_a_third_task_gets_the_command_line(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(RepeatTask, ["--out", str(out), "--no-progress"]) == 0
    assert json.loads((out / "report.json").read_text())["task"] == "repeat"
    capsys.readouterr()
    assert cli.main(RepeatTask, ["--out", str(out), "--no-progress"]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert cli.main(RepeatTask, ["--out", str(out), "--no-progress", "--resume", "--lr", "0.5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot resume") and "lr: 0.001 -> 0.5" in err and err.count("\n") == 1


def test_the_interface_docstring_names_every_method_the_trainer_calls():
    from course_utils.pipeline import task as task_module
    doc = task_module.__doc__
    for name in ("prepare", "state_dict", "build_model", "make_optimizer", "learning_rate", "batches", "split",
                 "to_device", "loss", "count", "tokens", "evaluate", "describe", "finish", "model_extras",
                 "reference_extras", "describe_batch", "num_epochs"):
        assert f"{name}(" in doc, f"pipeline/task.py's docstring does not say what {name} does"
        assert callable(getattr(Task, name)), name
