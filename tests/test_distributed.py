"""course_utils.pipeline.distributed: launch checks, the split of a global batch (pipeline/batches.py), DDP
on 2 CPU processes (gloo), with lesson 10's command.

The multi-process tests start `torchrun --nproc_per_node=2` on 127.0.0.1 with a free port and
compare with one process holding the same global batch (accumulating the same micro-batches).
Tolerance: losses agree to 1e-6 relative in fp32 without dropout (on the translate smoke run the
2-process and 1-process losses came out identical, difference 0.0: the all-reduce only changes the
order of the additions), and the two replicas are bit-identical (both apply the same all-reduced gradient).
"""
import datetime
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as torch_dist

from course_utils.pipeline import batches as B
from course_utils.pipeline import checkpoints
from course_utils.pipeline import distributed as D
from course_utils.pipeline.trainer import train
from course_utils.training import sync_gradients, unwrap
from course_utils.translation.__main__ import main as translate_main
from course_utils.translation.presets import ConfigError, make_config
from course_utils.translation.task import TranslationTask

ROOT = Path(__file__).resolve().parents[1]
RTOL = 1e-6
TORCHRUN_VARS = D.ENV_VARS + ("LOCAL_WORLD_SIZE", "GROUP_RANK", "TORCHELASTIC_RUN_ID")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARS}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **extra)
    return env


def torchrun(nproc, *args, tmp, timeout=180):
    """`torchrun --nproc_per_node=nproc *args` on 127.0.0.1; returns the CompletedProcess. Its temporary
    files (torchrun's torchelastic_* log folders among them) go into `tmp`, a folder of pytest's tmp_path."""
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", "--nnodes=1",
           "--master_addr=127.0.0.1", f"--master_port={free_port()}", *map(str, args)]
    env = clean_env(TMPDIR=str(tmp), TEMP=str(tmp), TMP=str(tmp))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


@pytest.fixture
def no_torchrun_env(monkeypatch):
    for key in TORCHRUN_VARS:
        monkeypatch.delenv(key, raising=False)


# ---------------------------------------------------------------------------------------------
# Launch environment
# ---------------------------------------------------------------------------------------------
FULL_ENV = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29500"}


def test_no_torchrun_variables_means_one_process_without_group(no_torchrun_env):
    assert D.read_env({}) is None
    dist = D.setup("cpu")
    assert (dist.rank, dist.world_size, dist.backend, dist.is_main) == (0, 1, None, True)
    assert dist.sum([1.0, 2.0]) == [1.0, 2.0] and dist.broadcast("x") == "x"
    model = torch.nn.Linear(2, 2)
    assert D.wrap_model(model, dist) is model and D.replica_max_diff(model, dist) == 0.0


def test_full_torchrun_environment_is_read():
    env = D.read_env(FULL_ENV)
    assert (env["rank"], env["world_size"], env["local_rank"], env["master_port"]) == (1, 2, 1, 29500)


@pytest.mark.parametrize("drop", ["MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE"])
def test_partial_environment_names_what_is_missing(drop):
    env = {k: v for k, v in FULL_ENV.items() if k != drop}
    with pytest.raises(D.DistributedConfigError, match=f"incomplete distributed environment.*{drop} missing"):
        D.read_env(env)


@pytest.mark.parametrize("change, words", [({"RANK": "2"}, "RANK must be in"),
                                           ({"MASTER_PORT": "0"}, "MASTER_PORT must be a port"),
                                           ({"WORLD_SIZE": "two"}, "must be integers"),
                                           ({"LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "2"}, "LOCAL_RANK must be")])
def test_impossible_environment_is_refused(change, words):
    with pytest.raises(D.DistributedConfigError, match=words):
        D.read_env({**FULL_ENV, **change})


def test_more_processes_than_gpus_is_refused():
    if torch.cuda.is_available():
        pytest.skip("needs a machine without GPUs")
    with pytest.raises(D.DistributedConfigError, match="visible GPU"):
        D.setup("cuda", environ=FULL_ENV)


# ---------------------------------------------------------------------------------------------
# Batch arithmetic: one global batch per optimizer step, split into processes x accumulation steps
# ---------------------------------------------------------------------------------------------
def test_global_batch_is_split_exactly_or_refused():
    assert B.accumulation_steps(512, 64, 2) == 4
    assert B.accumulation_steps(512, 64, 8) == 1
    assert B.micro_batch_size(8192, 4, 2) == 1024
    with pytest.raises(ConfigError, match="not divisible by micro-batch 64 x 3 processes"):
        B.accumulation_steps(512, 64, 3)
    with pytest.raises(ConfigError, match="cannot be split into 3 processes x 1"):
        B.micro_batch_size(1000, 3, 1)


def test_no_step_in_an_epoch_is_refused():
    B.check_enough_steps(1)
    with pytest.raises(ConfigError, match="gives no optimizer step per epoch"):
        B.check_enough_steps(0)


def test_every_part_of_a_global_batch_is_taken_once_by_one_process():
    from course_utils.pipeline.task import Task
    batch = list(range(11))                                        # 11 examples, ids = positions
    for world_size, accum in [(1, 1), (1, 4), (2, 2), (4, 1)]:
        parts = Task.split(None, batch, world_size * accum)
        assert len(parts) == world_size * accum and {len(p) for p in parts} <= {11 // len(parts), 11 // len(parts) + 1}
        mine = [B.my_parts(parts, world_size, rank) for rank in range(world_size)]
        assert all(len(m) == accum for m in mine), "every process accumulates the same number of parts"
        assert sorted(i for m in mine for part in m for i in part) == batch, (world_size, accum)
    assert [t.tolist() for t in Task.split(None, torch.arange(6).view(3, 2), 3)] == [[[0, 1]], [[2, 3]], [[4, 5]]]


@pytest.mark.multi30k
def test_an_epoch_has_the_same_optimizer_steps_for_any_number_of_parts():
    """docs/scaling-out.md: one process, 2 processes and 2 accumulation steps take the same global batches
    (before, the smoke preset took 24 steps in one process and 22 with two)."""
    task = TranslationTask(make_config("smoke"))
    task.prepare(None)
    epochs = {}
    for parts in (1, 2, 4):
        task.parts = parts
        epochs[parts] = [task.batches(e) for e in range(2)]
    assert epochs[1] == epochs[2] == epochs[4] and [len(b) for b in epochs[1]] == [12, 12]


# ---------------------------------------------------------------------------------------------
# DDP in this process (a group of one): wrapping, no_sync, checkpoints without "module."
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def group_of_one(no_torchrun_env):
    store = torch_dist.TCPStore("127.0.0.1", free_port(), 1, is_master=True,
                                timeout=datetime.timedelta(seconds=30))
    torch_dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield D.Dist(0, 1, 0, torch.device("cpu"), "gloo")
    D.cleanup()


def test_checkpoint_holds_the_unwrapped_model(group_of_one, tmp_path):
    dist = group_of_one
    model = D.wrap_model(torch.nn.Linear(3, 2), dist)
    assert isinstance(model, torch.nn.parallel.DistributedDataParallel)
    with sync_gradients(model, sync=False):
        model(torch.ones(1, 3)).sum().backward()
    checkpoints.save({"model": unwrap(model).state_dict(), "step": 7}, tmp_path / "c.pt", dist)
    ckpt, _ = checkpoints.load(tmp_path / "c.pt", dist)
    assert sorted(ckpt["model"]) == ["bias", "weight"], "keys must not start with 'module.'"
    torch.nn.Linear(3, 2).load_state_dict(ckpt["model"])      # loads into a plain model
    assert ckpt["step"] == 7 and not list(tmp_path.glob(".c.pt.*")), "no temporary file left"


# ---------------------------------------------------------------------------------------------
# The lesson-10 pipeline: `torchrun --nproc_per_node=2 -m course_utils.translation --preset smoke`
# ---------------------------------------------------------------------------------------------
# fp32 (--amp off) and no dropout, so that one process can reproduce the run exactly; a short run.
SMOKE = ["--preset", "smoke", "--amp", "off", "--dropout", "0", "--epochs", "1", "--max-eval-pairs", "6",
         "--beam-size", "2", "--no-progress"]


def smoke_history(out):
    return json.loads((out / "history.json").read_text()), json.loads((out / "report.json").read_text())


@pytest.fixture(scope="module")
def translate_runs(tmp_path_factory):
    """Two processes x 1 micro-batch of 512 tokens, one process x 2 micro-batches of 512, one process x 1 of 1024."""
    two, one, whole = (tmp_path_factory.mktemp(name) for name in ("smoke2", "smoke1", "smoke1x1"))
    result = torchrun(2, "-m", "course_utils.translation", *SMOKE, "--out", two, tmp=tmp_path_factory.mktemp("tmp"),
                      timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    torch.set_num_threads(1)
    assert translate_main([*SMOKE, "--out", str(one), "--accum-steps", "2"]) == 0
    assert translate_main([*SMOKE, "--out", str(whole)]) == 0
    return two, one, result.stdout, whole


@pytest.mark.multi30k
def test_translate_on_two_processes_matches_one_process(translate_runs):
    two, one, stdout, _ = translate_runs
    (h2, r2), (h1, r1) = smoke_history(two), smoke_history(one)
    assert (r2["world_size"], r2["accum_steps"], r2["micro_batch_tokens"]) == (2, 1, 512)
    assert (r1["world_size"], r1["accum_steps"], r1["micro_batch_tokens"]) == (1, 2, 512)
    assert r2["replica_max_diff"] == 0.0, "the two replicas hold different parameters"
    assert h2["step"] == h1["step"] and len(h2["step"]) >= 5
    for key in ("step_loss", "train_loss", "val_loss"):
        torch.testing.assert_close(torch.tensor(h2[key]), torch.tensor(h1[key]), rtol=RTOL, atol=0.0)
    assert stdout.count("epoch 1: train loss") == 1, "only rank 0 may log"
    assert "global batch 1024 tokens = 512 per micro-batch x 2 process(es) x 1 accumulation" in stdout


@pytest.mark.multi30k
def test_one_process_without_accumulation_takes_the_same_steps(translate_runs):
    """The same global batches, unsplit: the same steps and learning rates, the same losses up to the order
    of the additions."""
    two, _, _, whole = translate_runs
    (h2, _), (h1, r1) = smoke_history(two), smoke_history(whole)
    assert (r1["world_size"], r1["accum_steps"], r1["micro_batch_tokens"]) == (1, 1, 1024)
    assert h1["step"] == h2["step"] and h1["step_lr"] == h2["step_lr"] and r1["steps"] == 12
    torch.testing.assert_close(torch.tensor(h1["step_loss"]), torch.tensor(h2["step_loss"]), rtol=1e-4, atol=0.0)


@pytest.mark.multi30k
def test_translate_checkpoint_of_two_processes_resumes_on_one(translate_runs):
    two, one, _, _ = translate_runs
    cfg = make_config("smoke", amp="off", dropout=0.0, epochs=2, max_eval_pairs=6, accum_steps=2, beam_size=2)
    runs = [train(TranslationTask(cfg), out, resume=True, show_progress=False, log=lambda *a: None)[1]
            for out in (two, one)]
    assert runs[0]["epoch"] == [1, 2]
    torch.testing.assert_close(torch.tensor(runs[0]["step_loss"]), torch.tensor(runs[1]["step_loss"]),
                               rtol=RTOL, atol=0.0)


@pytest.mark.parametrize("args, words", [
    (["--batch-tokens", "1000", "--accum-steps", "3"], "global batch 1000 cannot be split into 1 processes x 3"),
    (["--micro-batch-tokens", "300"], "global batch 1024 is not divisible by micro-batch 300"),
    (["--batch-tokens", "1024", "--accum-steps", "16"], "cannot hold the longest sentence"),
    pytest.param(["--max-train-pairs", "1", "--accum-steps", "2"], "gives no optimizer step per epoch",
                 marks=pytest.mark.multi30k),       # one sentence cannot be split into 2 micro-batches
])
def test_translate_impossible_configuration_stops_before_training(args, words, tmp_path, capsys,
                                                                  no_torchrun_env):
    assert translate_main(["--preset", "smoke", "--out", str(tmp_path), "--no-progress", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and err.count("\n") == 1
    assert not (tmp_path / "checkpoint.pt").exists()


def test_translate_refuses_a_partial_torchrun_environment(tmp_path, capsys, no_torchrun_env, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert translate_main(["--preset", "smoke", "--out", str(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "incomplete distributed environment" in err and "LOCAL_RANK, MASTER_ADDR, MASTER_PORT missing" in err
