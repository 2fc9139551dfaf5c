"""tether.clients.tui: ``tether chat`` on a terminal: the finite chat's output and the
interactive prompt (prompt_toolkit), rendering events and markdown (rich), the
chat's slash commands, long pastes and history, inline approval prompts.

- ``chat``: the command's two modes; ``plan``: which mode, prompt and options.
- ``interactive``, ``chat_screen``, ``chat_wait``: the prompt kept open all day.
- ``render``, ``markdown``: a session's events as terminal text.
- ``slash``, ``pastes``, ``approval_prompt``: what the input line understands.

May import: the library (``tether.clients.library``) and ``tether.rpc``; never the
CLI's command modules or the ACP adapter. prompt_toolkit and rich are imported
only on the paths that draw with them.
"""
