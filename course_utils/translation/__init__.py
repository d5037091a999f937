"""Lesson 10's translator: a Transformer trained on Multi30k German -> English, scored with sacreBLEU, as a
task of the course's training pipeline (course_utils/pipeline: the loop, checkpoints, runs, report, command line).

    python -m course_utils.translation --preset cpu          # the command line (__main__.py)

What is specific to the translator; each module imports only modules listed below it:

    __main__     the command line: the pipeline's (pipeline/cli.py) with the translator's options
    run          run(cfg, out_dir): the pipeline's run of a TranslationTask; default_out
    task         TranslationTask (pipeline/task.py's interface): data, model, loss, evaluation, the report's
                 scores, the reference file's extras; setup_state (a model to step by hand)
    reference    the course's reference run (reference_runs/cpu.json): reading it, its attention maps
    widgets      the cross-attention of a translated sentence, the translate widget
    step         forward_loss, translation_step (the course's ONE optimizer step, training.train_step), evaluate_loss
    data         Multi30k -> subword ids (the tokenizer kept with the run)
    batching     BucketBatchSampler (length buckets), micro_batch_tokens (checked against the longest sentence)
    decode       corpus translation (batched greedy / beam search) and sacreBLEU
    figures      a run's learning curves, the padding of batches, a reference run's cross-attention
    presets      Config (pipeline.task.RunConfig + the translator's settings), PRESETS, build_model, load_translator

Shared with the other lessons (in course_utils/): data.batch (PAD_ID, pad, Batch, collate: the course's
one way to batch), training (the optimizer step, schedules, loss), precision (autocast; training uses it
too), decoding (greedy and beam search), tokenization (BPE), data.multi30k (the corpus).

Nothing is imported here, so that `import course_utils.translation.presets` costs only what it needs.
"""
