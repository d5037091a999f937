"""The course's training pipeline: ONE way to train every long run (lesson 10's translator, lesson 12's
language model, and any model that implements `task.Task`), with checkpoints and exact resume, a runs
folder that never loses or silently replaces a run, one report schema, one command line.

    report = trainer.run(MyTask(cfg), "runs/my-run", resume=True)     # from Python or a notebook
    sys.exit(cli.main(MyTask))                                          # a task's __main__.py

Each module imports only modules listed below it:

    cli          the command line every task shares: options, checks, one-line errors, torchrun
    trainer      train(task, out_dir) and run(...): epochs, the ONE optimizer step (training.train_step),
                 evaluation, checkpoints, exact resume, Ctrl-C, several processes; RunState
    report       report.json (one schema), the command it records (no machine's folders), the reference file
    runs         the run folder's refusals (a run kept there, nothing to resume), Ctrl-C, the allocator setting
    distributed  processes only: torchrun's environment, the process group, DDP, collectives
    checkpoints  every checkpoint written (verified, the previous good one kept) and read (the newest usable)
    batches      a global batch per optimizer step, split into processes x accumulation steps
    task         THE interface a model implements (Task, RunConfig, ConfigError), with a whole example

The tasks live beside it, one subpackage each: course_utils/translation/, course_utils/language_model/.
Shared with the lessons (in course_utils/): training (the optimizer step), precision (autocast),
config (device, runs folder, the machine's description), files (atomic writes), reference_runs (the one
writer of reference files).

Nothing is imported here, so that `import course_utils.pipeline.task` costs only what it needs.
"""
