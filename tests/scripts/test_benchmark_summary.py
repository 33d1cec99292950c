"""`scripts/benchmark.py`'s summary table (the speed guide's), on hand-made measurements.

The table is quoted in `docs/guide/speed.md` as printed, so its arithmetic is the guide's:
every ratio is reference / advsim, every span min-max over the T rows; the values below
are chosen so that each is read off by hand.
"""


def test_the_table_reads_each_ratio_as_reference_over_advsim(load_script):
    bench = load_script("benchmark")
    bench.MEASURED.update(
        heuristic=(0.005, None, 120.0),
        max_over_steps={10_000: (0.2, 8.0, 300.0), 100_000: (0.8, None, 300.0)},
        calibration={
            1: {"cold": (0.5, 10.0), "row": (0.5, 12.0), "two cells": (0.6, 24.0)},
            100: {"cold": (1.0, 15.0), "row": (1.0, 16.0), "two cells": (1.2, 32.0)},
        },
    )
    sampling = {
        "binomial": {0.01: (50.0, 350.0), 0.5: (100.0, 300.0)},
        "figure2": (3.0, 12.0),
        "normals": {1: (9.0, 9.0), 10: (1.5, 2.0), 100: (2.5, 3.0)},
    }
    rows = bench.summary_table(sampling).splitlines()
    assert rows[0] == "| what | advsim | reference method | ratio | target |"
    body = "\n".join(rows[2:])
    assert "| `heuristic_epsilon`, T = 10^5 | 5.0 ms | dp-accounting mixture PLD: > 120 s |" in body
    assert "T = 10^4 | 0.20 s | 8.0 s (every t) | 40x | < 0.5 s |" in body
    assert "T = 10^5 | 0.80 s | > 300 s (every t) | > 375x | < 5 s |" in body
    # cold: advsim 0.5 and 1.0 s, reference 10 and 15 s, ratios 20 and 15
    assert "cold, per T | 0.5-1.0 s | 10.0-15.0 s | 15.0-20.0x | >= 2.5x |" in body
    assert "a sweep cell) | 0.5-1.0 s | 12.0-16.0 s | 16.0-24.0x | >= 5x |" in body
    assert "same T | 0.6-1.2 s | 24.0-32.0 s | 26.7-40.0x |" in body
    assert "| 50; 100 ns/draw | 350; 300 ns/draw | 7.0x; 3.0x | |" in body
    assert "| 3.0 s | 12.0 s (`binomial=\"jax\"`) | 4.0x | >= 2.5x |" in body
    # d = 1 is left out (its target is for d >= 10); the whole-block span is 2.00-3.00
    assert "d = 10; 100 | 1.50; 2.50 | 2.00-3.00 (lanes of a whole block) | | >= 0.8 |" in body
    assert len(rows) == 2 + 9
