"""Sessions as a person manages them: create, resume, list, rename, delete, fork, export
and compact.

May import: config, runtime, ledger, model, engine (compaction only).
"""
