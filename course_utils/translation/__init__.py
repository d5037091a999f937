"""Lesson 10's training pipeline: a Transformer trained on Multi30k German -> English, scored with sacreBLEU.

    python -m course_utils.translation --preset cpu          # the command line (__main__.py)

The pipeline, from the command line down; each module imports only modules listed below it:

    __main__     the command line: arguments checked before any work, one-line errors, torchrun's entry
    run          run(cfg, out_dir): train, decode test_2016_flickr, write report.json; default_out
    reference    the course's reference runs (reference_runs/*.json) and the ONE command that writes them
    trainer      train(cfg, out_dir): epochs, validation, checkpoints, exact resume, Ctrl-C, averaging;
                 a folder that holds a run is never replaced silently
    step         setup_state, translation_step (the course's ONE optimizer step, training.train_step), evaluate_loss
    data         Multi30k -> subword ids (the tokenizer kept with the run); bucketed micro-batches
    distributed  processes only: the process group, DDP, collectives (and a demo that checks a machine)
    batching     BucketBatchSampler, and all batch arithmetic: micro-batches, accumulation, steps per epoch
    checkpoints  every checkpoint written (verified first, the previous good one kept) and read (the newest good one)
    widgets      the cross-attention of a translated sentence, the translate widget
    decode       corpus translation (batched greedy / beam search) and sacreBLEU
    figures      a run's learning curves, the padding of batches, a reference run's cross-attention
    presets      Config, PRESETS, check_config, build_model, load_translator

Shared with the other lessons (in course_utils/): data.batch (PAD_ID, pad, Batch, collate: the course's
one way to batch), training (the optimizer step, schedules, loss), precision (autocast; training uses it
too), decoding (greedy and beam search), tokenization (BPE), data.multi30k (the corpus).

Nothing is imported here, so that `import course_utils.translation.presets` costs only what it needs.
"""
