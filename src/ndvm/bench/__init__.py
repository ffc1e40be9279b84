"""Measurement logic behind ``ndvm bench``: decompose, amortize, crossover, throughput.

Every run writes its tables (CSV + JSON), a plot and an environment manifest into the chosen
output folder only; ratios are always computed from timings taken in the same run.
"""
