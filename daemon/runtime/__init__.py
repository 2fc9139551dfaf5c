"""The owner process's own state: its home directory and lock, the supervisor of its
background work, its activity log, and the test fault hooks.

May import: config.
"""
