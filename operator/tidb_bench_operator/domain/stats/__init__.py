"""Numbers with error bars: trials, inference against a baseline, trend, sweep analysis.

Only this package imports numpy and scipy (inference); its `__init__` imports nothing, so a
module that needs only `trials` or `analysis` never pays for them.
"""
