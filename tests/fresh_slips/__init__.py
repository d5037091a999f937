"""Learner slips and right answers written another way, from the notebooks' text and reference solutions alone by
people who had not read the checks: each module's SLIPS and CORRECT are lists of (exercise, name, function).
- lessonNNh, every lesson 00-14 (helpers, 2026-11-27): the slips most learners make on each exercise, not asked
  to avoid anything planted before. Before the checks were changed for them: lessons 00-10, 305 of 434 named
  (20 accepted); 11-13, 159 of 162; 14, 25 of 38 (docs/development.md, per lesson).
- lessonNNi, every lesson (other helpers, the same day, after lessonNNh's fixes, written the same way): before the
  checks were changed for them, 00-10: 383 of 423 named (9 accepted); 11-13: 159 of 161; 14: 29 of 36.
- lesson11/12/13 (a helper, 2026-11-27, first catalogue): before the checks were changed for them, 145 of 160
  slips named, 2 accepted.
- lesson11b/12b/13b (another helper, the same day, after the first catalogue's fixes; names "b2: ..." are a
  second, less textbook round): before the checks were changed for them, 169 of 188 named (121 of 124 in the
  first round, 48 of 64 in the second), 5 accepted.
- lesson11c/12c/13c (a third helper, after the second catalogue's fixes; names "u: ..." are unusual slips):
  before the checks were changed for them, 109 of 117 named (53 of 53 textbook slips, 56 of 64 unusual ones),
  none accepted.
- lesson11d/12d/13d (a fourth helper, after the third catalogue's fixes): before the checks were changed for them,
  45 of 48 named by hand (24 of 24 textbook slips, 21 of 24 unusual ones), none accepted; one answer planted as
  right underflowed to NaN at τ = 0.001 and was accepted under 12 of 16 seed offsets (now a slip here).
- lesson11e-g/12e-g/13e-g (three more helpers, each after the previous catalogue's fixes, asked for slips unlike any
  planted before): before the checks were changed for them, 85 of 135, 89 of 120 and 55 of 90 named; 7, 8 and 5
  accepted. (Two slips of the last one, named only later, were kept apart as NOT_YET_NAMED until then.)
`python tools/measure_slips.py tests/fresh_slips/lesson12g.py` measures a catalogue (naming.py: what counts)."""
