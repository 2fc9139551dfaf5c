"""The agent's working tools, registered by owner.py on the ToolRegistry.

- env.py: the environment commands run with (the owner's, secrets scrubbed);
- output.py: a command's output capped for the model (head and tail kept);
- processes.py: `ProcessTable`, background processes with bounded output rings,
  process-group kill, and the exactly-once notice of ``notify_on_complete``;
- terminal.py: the ``terminal`` and ``process`` tools (toolset ``terminal``);
- files.py: ``read_file``, ``write_file``, ``edit_file``, ``search_files``,
  ``list_dir`` (toolset ``files``).
"""
