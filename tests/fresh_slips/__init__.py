"""Slips and unusual right answers for lessons 11-13, written from the notebooks' text alone by someone who had
not read the checks (a helper, 2026-11-27): each module's SLIPS and CORRECT are lists of
(exercise, name, function). Measured before the checks were changed for them: 145 of 160 named, 2 accepted."""
