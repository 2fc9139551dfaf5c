"""The agent's working tools, registered by owner.py on the ToolRegistry.

- env.py: the environment commands run with (an allowlist of the owner's);
- sandbox.py: the bubblewrap sandbox around every command (probe, argv, hints);
- launch.py: starting a command, reading it to its end, ending it whole;
- output.py: a command's output capped for the model (head and tail kept);
- processes.py: `ProcessTable`, background processes with bounded output rings
  and the exactly-once notice of ``notify_on_complete``;
- terminal.py: the ``terminal`` and ``process`` tools (toolset ``terminal``);
- files.py: ``read_file``, ``write_file``, ``edit_file``, ``search_files``,
  ``list_dir`` (toolset ``files``);
- paths.py, beneath.py: where a file tool's path lands (beneath the session's
  cwd, never through a symlink out; the owner's home refused), and atomic writes;
- lineage.py: which processes are the agent's (registered tool processes, their
  sessions, the environment marker), for the peer check of daemon/transport/peers.py;
- editor.py: an editor's connection as executor (the offers and requests of
  fs.offer and terminal.offer), and ``EditorFiles``, the file tools' reads and writes
  by an editor; editor_terminal.py: ``EditorTerminals``, a sandboxed command run in an
  editor's terminal.

May import: config, runtime, ledger (late delivery, a viewer's notices), approvals, engine (what
a tool is). Never delegation.
"""
