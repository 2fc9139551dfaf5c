"""The model client: one OpenAI-compatible chat-completions request in, one Completion out;
its errors, clock, stream choice, context windows, usage and prices, the doctor's probe and the
offline demo provider.

May import: config, runtime. Nothing of the ledger or the engine.
"""
