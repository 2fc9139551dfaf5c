"""The owner process's own state: its home directory and lock, and the supervisor of its
background work.

May import: config.
"""
