"""Regression detection: plain functions, no Django (DESIGN §6).

- `series`: which series a probe run touches and its point in each.
- `changepoints`: change points over a series' history (ruptures PELT + Welch t-test merge).
- `baseline`: the fast robust-baseline check that asks for a confirmation re-probe.

The Django side (rows, alert lifecycle, confirmation runs) is `collectors/alerts.py`.
"""
