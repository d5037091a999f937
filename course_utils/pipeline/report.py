"""A run's report (report.json, one schema for every task), the command it records, and its reference file.

    report = build_report(task, state, results, command, seconds, load_before)
    write_reference(task, report, history, "lesson12_full", model)     # course_utils.reference_runs.write
    command_line("python -m course_utils.translation", argv)           # what a report records: no machine paths

The report: task, preset, command, device, device_name, threads, amp, compile, world_size, accum_steps,
epochs, steps, total_steps, train_seconds (optimizer steps only), tokens_per_second, parameters,
replica_max_diff, then the task's results (Task.finish: scores, examples), wall_seconds, machine
(config.describe_machine, with the load before and after), config, notes.
"""
from pathlib import Path

import torch

from ..config import describe_machine, load_average, runs_dir

__all__ = ["PATH_OPTIONS", "build_report", "command_line", "count_parameters", "load_average", "write_reference"]
PATH_OPTIONS = ("--out",)


def count_parameters(model):
    """Parameters of `model`, each shared tensor counted once."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def _portable(path):
    """A path as a report may show it: relative as given, or inside the runs folder or the working folder;
    else only its last part (a report shows the command, never a machine's folders)."""
    path = Path(path)
    if not path.is_absolute():
        return str(path)
    for base, shown in ((runs_dir(), "runs"), (Path.cwd(), ".")):
        try:
            return str(Path(shown) / path.resolve().relative_to(base.resolve()))
        except ValueError:
            continue
    return path.name


def command_line(prog, argv):
    """`prog` and its arguments as one line, the values of PATH_OPTIONS shown by `_portable`."""
    words, argv = [prog], list(argv)
    for i, word in enumerate(argv):
        option, eq, value = word.partition("=")
        if option in PATH_OPTIONS and eq:
            word = f"{option}={_portable(value)}"
        elif i > 0 and argv[i - 1] in PATH_OPTIONS:
            word = _portable(word)
        words.append(word)
    return " ".join(words)


def build_report(task, state, results, command, seconds, load_before):
    """The run's report.json (a dict): the pipeline's keys, the task's results, the machine and the settings."""
    cfg, machine = task.cfg, describe_machine(state.device, load_before)
    examples = results.get("examples")
    report = {
        "task": task.name, "preset": cfg.preset,
        "command": command or f"{type(task).__module__}: trainer.run({type(task).__name__}(...)) from Python",
        "device": str(state.device), "device_name": machine["device_name"], "threads": torch.get_num_threads(),
        "amp": str(state.amp_dtype).replace("torch.", "") if state.amp_dtype else "off", "compile": cfg.compile,
        "world_size": state.world_size, "accum_steps": cfg.accum_steps,
        "epochs": state.epoch, "steps": state.step, "total_steps": state.total_steps,
        "train_seconds": round(state.train_seconds, 1),
        "tokens_per_second": round(state.tokens / max(state.train_seconds, 1e-9), 1),
        "parameters": count_parameters(state.raw_model), "replica_max_diff": state.replica_max_diff,
        **{k: v for k, v in results.items() if k != "examples"},
        "wall_seconds": round(seconds, 1), "machine": machine, "config": cfg.to_dict(),
    }
    if examples is not None:
        report["examples"] = examples
    report["notes"] = ("train_seconds counts optimizer steps only (evaluation excluded); tokens_per_second "
                       f"counts {task.tokens_counted}.")
    return report


def write_reference(task, report, history, name, model):
    """The run's reference file `name`.json in the task's reference folder (course_utils.reference_runs.write)."""
    from ..reference_runs import write

    payload = {"report": report, "history": history, **task.reference_extras(model, history)}
    return write(name, folder=task.reference_folder, written_by=report["command"],
                 what=f"{task.command} --preset {report['preset']}: {report['steps']} optimizer steps",
                 settings=report["config"], result={k: report[k] for k in task.headline if k in report},
                 machine=report["machine"], **payload)
