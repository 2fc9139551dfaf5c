"""The admission ledger: a submission recorded before it is acknowledged, its transitions,
start-up recovery, the per-session turn scheduler, journal units and late delivery.

May import: config, runtime, model (usage shapes only). Never the engine: the ledger tells the
scheduler a session is ready; the turn runner comes to it.
"""
