"""tether.clients.acp: ``tether acp``, the Agent Client Protocol on stdin/stdout for an
editor, as one more viewer of the owner.

- ``agent``: the ACP agent: sessions, prompts, cancel, permission requests.
- ``updates``: tether's events and transcript as ACP ``session/update`` notifications.
- ``options``: the session settings an editor shows (config options, modes).
- ``asking``: permission requests, withdrawn when an approval is answered elsewhere.
- ``plan``: a turn's delegations as the editor's plan.

May import: the library (``tether.clients.library``), ``tether.rpc`` and the
``acp`` distribution; never the CLI or the terminal chat. The CLI imports it only
when ``tether acp`` runs.
"""
