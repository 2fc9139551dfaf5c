"""``tether bench``: measure a private owner against the baselines that bound it.

The bench starts its own owner as a subprocess (so the measuring clients never
share its GIL or loop) on a temporary home, or on ``--home``, with inference
replaced by `InstantProvider`, which answers at once: every figure is the cost
of tether itself. Each figure is measured in the same run as the baseline that
bounds it, so the ratio holds on a noisy machine:

- ``ping``: round trip of ``ping`` vs. a bare websockets echo server (same
  library, same options) on a Unix socket, measured in interleaved blocks;
- ``submit`` / ``retry``: a new ``prompt.submit`` to its durable receipt, and a
  resubmission of a terminal input_id (a read);
- ``admissions_per_s``: 64 clients on their own connections submitting at once
  (their turns held at the provider, as behind a model still thinking), vs. one
  writer making sequential single-row commits (WAL, synchronous=FULL) in the
  same directory: what group commit has to beat. Rounds of the two alternate;
  ``echo_floor`` is the same 64 clients against the echo server;
- ``turns_per_s``: finite turns from submit to terminal across 64 sessions;
- ``http_turns``: finite turns of 16 sessions against an OpenAI-compatible model
  server in a process of its own, over real HTTP (modelserver.py, httpturns.py):
  what the model client adds to every real turn;
- ``fanout``: 100 viewers of one session while turns stream deltas; latency is
  from the event's append (its ``created_at``, stamped in the committing
  transaction, read back from state.db afterwards) to its arrival at the last
  viewer, so it includes the commit's fsync;
- ``oneshot_ms``: ``tether chat --oneshot`` against the warm owner vs.
  ``python -c pass``;
- ``owner_rss_mib``: VmRSS of the owner after the run.

On request only: ``long_session`` (one session over many turns, longsession.py)
and ``oneshot_fanout`` (a one-shot whose prompt fans out to helpers, against
the model server; with ``--hermes PATH`` hermes-agent's ``-z`` on the same
prompt, alternating: versus.py).

With ``--json`` the last line of stdout is one JSON object; otherwise a table
with the targets. Progress goes to stderr. docs/performance.md records runs.

With ``--store URL`` the bench measures on PostgreSQL instead: three private
owners ("nodes") on a fresh schema of that database, dropped afterwards;
admissions and turns on one node and spread over three, the database's share
of the machine, and events crossing from one node to another (fleet.py).

The parts: servers.py (the private owner and the echo baseline, each run in a
process of its own), processes.py (starting, probing and stopping them),
clients.py (the measuring clients), phases.py (the phases), command.py (the
targets, the report and the command line); for ``--store``, fleetcmd.py (set up,
tear down, report), fleet.py (its phases) and pgside.py (the database side).
Nothing in the owner imports this package: it only drives the owner from outside.
"""

from .command import SIZES, TARGETS, judge, main
from .servers import InstantProvider

__all__ = ["InstantProvider", "SIZES", "TARGETS", "judge", "main"]
