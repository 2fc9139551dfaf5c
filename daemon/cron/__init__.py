"""Scheduled jobs (``tether cron``): schedules, the firing loop, delivery, the cron.* methods.

- ``schedule.py``: schedule text → times (cron expressions, intervals, one-shots). Pure.
- ``plan.py``: what a due job does now (fire, skip, wait). Pure.
- ``service.py``: ``CronService``, the loop that fires due jobs, each fire one transaction.
- ``delivery.py``: following a run to its end and delivering its answer once.
- ``jobs.py``: ``CronJobs``, creating and changing jobs, run history.
- ``handlers.py``: the cron.* rpc methods on the dispatcher.

docs/cron.md is the user's guide.

May import: config, runtime, model, ledger: a job fires as an admission, never by calling the engine.
"""
