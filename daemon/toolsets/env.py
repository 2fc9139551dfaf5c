"""The environment a command runs with: the owner's, minus anything secret.

The owner's environment may hold API keys and tokens (``OPENAI_API_KEY``, a
cloud CLI's credentials, tether's own settings); a command the model runs must
never see them: it could print them into the transcript, or send them away.
A variable is dropped when its name looks secret, or when its value is one of
the keys the owner was configured with (whatever the variable is called).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["scrubbed_env", "SECRET_NAME"]

#: names that carry credentials, by convention
SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|SESSION_ID|"
    r"PRIVATE|DSN|CONNECTION_STRING)"
    r"|^(OPENAI_|ANTHROPIC_|AWS_|AZURE_|GOOGLE_|GCP_|GH_|GITHUB_|GITLAB_|HF_|HUGGING|TETHER_|"
    r"DATABASE_URL$|PG(PASSWORD|PASS)$|SSH_AUTH_SOCK$|GPG_AGENT)",
    re.IGNORECASE)


def scrubbed_env(environ: Mapping[str, str], secrets: Iterable[str | None] = ()) -> dict[str, str]:
    """``environ`` without secret-looking names and without the given secret values."""
    values = {s for s in secrets if s}
    return {k: v for k, v in environ.items()
            if not SECRET_NAME.search(k) and not any(s in v for s in values)}
