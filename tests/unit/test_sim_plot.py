"""The replay plot: compared configs read apart in colour and in line style."""

from __future__ import annotations

from shared.local.sim.plot import run_look


def test_compared_runs_differ_in_colour_and_style_for_every_curve() -> None:
    # Given the first run and a compared config's run
    (first_style, first_colours), (second_style, second_colours) = run_look(0), run_look(1)
    # Then they differ in line style, and each curve (pending, provisioned, busy) in colour
    assert first_style != second_style
    assert all(a != b for a, b in zip(first_colours, second_colours, strict=True))
    # and no curve shares a colour with another curve of either run
    assert len({*first_colours, *second_colours}) == 6
