"""tether.daemon: the owner process.

It owns everything that runs on behalf of a home: the home's lock and
descriptor, the WebSocket transport, the admission service and the ledger's
transitions, the scheduler and turn runner, the agent engine with its provider
client and tools, delegation, event fan-out, and recovery. owner.py wires the
services together; docs/architecture.md maps the modules. The bench (`tether
bench`) lives in the ``bench`` subpackage, beside the owner, not inside it.
"""
