"""Numbered schema migrations, tracked by ``PRAGMA user_version``.

Migration N brings a file from user_version N-1 to N. Each runs in its own
transaction together with the version bump, so a crash mid-migration leaves the
file at the previous version. Never edit a shipped migration; add the next one.
"""

from __future__ import annotations

import sqlite3

__all__ = ["MIGRATIONS", "migrate", "SCHEMA_VERSION"]

_V1 = """
CREATE TABLE runtime (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE sessions (
    session_id        TEXT PRIMARY KEY,
    request_id        TEXT UNIQUE,
    params_digest     TEXT,
    parent_session_id TEXT REFERENCES sessions(session_id),
    source            TEXT,
    title             TEXT,
    cwd               TEXT,
    options_json      TEXT NOT NULL,
    created_at        REAL NOT NULL,
    updated_at        REAL NOT NULL,
    message_count     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sessions_updated ON sessions(updated_at, session_id);

CREATE TABLE messages (
    session_id      TEXT NOT NULL REFERENCES sessions(session_id),
    idx             INTEGER NOT NULL,
    role            TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'system')),
    content         TEXT,
    tool_calls_json TEXT,
    tool_call_id    TEXT,
    name            TEXT,
    admission_id    TEXT,
    created_at      REAL NOT NULL,
    PRIMARY KEY (session_id, idx)
) WITHOUT ROWID;

CREATE TABLE session_admissions (
    seq               INTEGER PRIMARY KEY AUTOINCREMENT,
    admission_id      TEXT NOT NULL UNIQUE,
    target_session_id TEXT NOT NULL REFERENCES sessions(session_id),
    principal_id      TEXT NOT NULL,
    request_id        TEXT NOT NULL,
    payload_json      TEXT NOT NULL,
    payload_digest    TEXT NOT NULL,
    status            TEXT NOT NULL
                      CHECK (status IN ('queued', 'started', 'unknown', 'terminal')),
    outcome           TEXT
                      CHECK (outcome IN ('completed', 'failed', 'cancelled', 'interrupted')),
    result_json       TEXT,
    owner_epoch       INTEGER NOT NULL,
    created_at        REAL NOT NULL,
    started_at        REAL,
    finished_at       REAL,
    UNIQUE (principal_id, target_session_id, request_id),
    CHECK ((status = 'terminal') = (outcome IS NOT NULL))
);
CREATE INDEX admissions_open ON session_admissions(target_session_id, seq)
    WHERE status != 'terminal';

CREATE TABLE async_delegations (
    delegation_id       TEXT PRIMARY KEY,
    origin_session_id   TEXT NOT NULL REFERENCES sessions(session_id),
    origin_admission_id TEXT NOT NULL,
    state               TEXT NOT NULL
                        CHECK (state IN ('running', 'completed', 'failed', 'interrupted')),
    task_json           TEXT NOT NULL,
    result_json         TEXT,
    delivery_state      TEXT NOT NULL DEFAULT 'pending'
                        CHECK (delivery_state IN ('pending', 'delivered')),
    owner_epoch         INTEGER NOT NULL,
    created_at          REAL NOT NULL,
    finished_at         REAL,
    delivered_at        REAL
);

CREATE TABLE events (
    session_id   TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    type         TEXT NOT NULL,
    admission_id TEXT,
    payload_json TEXT NOT NULL,
    created_at   REAL NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;

CREATE TABLE tokens (
    token_id   TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    label      TEXT,
    created_at REAL NOT NULL
);
"""

# session.list pages in creation order (docs/decisions.md, "Sessions")
_V2 = """
DROP INDEX sessions_updated;
CREATE INDEX sessions_created ON sessions(created_at, session_id);
"""

# scheduled jobs and their runs (docs/cron.md): one run row per job and scheduled time
_V3 = """
CREATE TABLE cron_jobs (
    job_id        TEXT PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    schedule      TEXT NOT NULL,
    tz            TEXT NOT NULL,
    anchor_at     REAL NOT NULL,
    prompt        TEXT NOT NULL,
    options_json  TEXT NOT NULL,
    cwd           TEXT,
    enabled       INTEGER NOT NULL DEFAULT 1,
    paused_at     REAL,
    overlap       TEXT NOT NULL CHECK (overlap IN ('skip', 'queue')),
    missed        TEXT NOT NULL CHECK (missed IN ('catch_up', 'skip')),
    grace_seconds REAL,
    deliver       TEXT,
    next_run_at   REAL,
    created_at    REAL NOT NULL,
    updated_at    REAL NOT NULL
);

CREATE TABLE cron_runs (
    run_id          TEXT PRIMARY KEY,
    job_id          TEXT NOT NULL,
    scheduled_for   REAL NOT NULL,
    fired_at        REAL NOT NULL,
    kind            TEXT NOT NULL
                    CHECK (kind IN ('scheduled', 'late', 'catch_up', 'manual')),
    status          TEXT NOT NULL CHECK (status IN ('skipped', 'admitted')),
    skip_reason     TEXT CHECK (skip_reason IN ('still_running', 'missed', 'paused')),
    missed_count    INTEGER NOT NULL DEFAULT 0,
    session_id      TEXT,
    admission_id    TEXT,
    delivery_status TEXT CHECK (delivery_status IN ('pending', 'delivered', 'failed')),
    delivery_error  TEXT,
    delivered_at    REAL,
    UNIQUE (job_id, scheduled_for),
    CHECK ((status = 'skipped') = (skip_reason IS NOT NULL)),
    CHECK ((status = 'admitted') = (admission_id IS NOT NULL))
);
CREATE INDEX cron_runs_pending_delivery ON cron_runs(job_id)
    WHERE delivery_status = 'pending';
"""

# tools and approvals: approval prompts, remembered answers, background processes
# (docs/tools.md)
_V4 = """
CREATE TABLE approvals (
    approval_id   TEXT PRIMARY KEY,
    session_id    TEXT NOT NULL REFERENCES sessions(session_id),
    admission_id  TEXT,
    call_id       TEXT NOT NULL,
    tool          TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('command', 'file')),
    subject       TEXT NOT NULL,
    why           TEXT NOT NULL,
    cwd           TEXT,
    status        TEXT NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'cancelled')),
    decision      TEXT CHECK (decision IN ('once', 'session', 'always', 'deny')),
    cause         TEXT CHECK (cause IN ('answered', 'timeout', 'interrupted', 'shutdown')),
    answered_by   TEXT,
    reason        TEXT,
    owner_epoch   INTEGER NOT NULL,
    created_at    REAL NOT NULL,
    expires_at    REAL NOT NULL,
    resolved_at   REAL,
    CHECK ((status = 'pending') = (cause IS NULL))
);
CREATE INDEX approvals_pending ON approvals(session_id, created_at) WHERE status = 'pending';

CREATE TABLE approval_rules (
    rule_id     TEXT PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('command', 'file')),
    pattern     TEXT NOT NULL,
    session_id  TEXT NOT NULL DEFAULT '',
    approval_id TEXT,
    created_at  REAL NOT NULL,
    UNIQUE (kind, pattern, session_id)
);

CREATE TABLE processes (
    process_id     TEXT PRIMARY KEY,
    session_id     TEXT NOT NULL REFERENCES sessions(session_id),
    admission_id   TEXT,
    command        TEXT NOT NULL,
    cwd            TEXT,
    pid            INTEGER,
    pid_started    TEXT,
    state          TEXT NOT NULL CHECK (state IN ('running', 'exited', 'killed', 'lost')),
    exit_code      INTEGER,
    output_tail    TEXT,
    notify         INTEGER NOT NULL CHECK (notify IN (0, 1)),
    delivery_state TEXT NOT NULL CHECK (delivery_state IN ('none', 'pending', 'delivered')),
    owner_epoch    INTEGER NOT NULL,
    created_at     REAL NOT NULL,
    finished_at    REAL,
    delivered_at   REAL
);
CREATE INDEX processes_running ON processes(state) WHERE state = 'running';
"""

# TCP tokens that expire, and one-time tokens (`tether web`); docs/protocol.md
_V5 = """
ALTER TABLE tokens ADD COLUMN expires_at REAL;
ALTER TABLE tokens ADD COLUMN once INTEGER NOT NULL DEFAULT 0
"""

# the HTTP endpoint's conversations: a client's own key (X-Tether-Conversation,
# X-OpenWebUI-Chat-Id) mapped to one session per token; docs/http.md
_V6 = """
CREATE TABLE api_conversations (
    token_id         TEXT NOT NULL,
    conversation_key TEXT NOT NULL,
    session_id       TEXT NOT NULL REFERENCES sessions(session_id),
    created_at       REAL NOT NULL,
    PRIMARY KEY (token_id, conversation_key)
);
CREATE INDEX api_conversations_session ON api_conversations(session_id)
"""

# long sessions (docs/long-sessions.md): each session's token sums by model, where a
# fork came from, and compaction records (a summary standing for messages
# [first_index, end_index) of the transcript, which itself stays whole)
_V7 = """
ALTER TABLE sessions ADD COLUMN usage_json TEXT;
ALTER TABLE sessions ADD COLUMN forked_from TEXT;
ALTER TABLE sessions ADD COLUMN forked_at_seq INTEGER;
CREATE TABLE compactions (
    compaction_id TEXT PRIMARY KEY,
    session_id    TEXT NOT NULL REFERENCES sessions(session_id),
    first_index   INTEGER NOT NULL,
    end_index     INTEGER NOT NULL,
    summary       TEXT NOT NULL,
    model         TEXT NOT NULL,
    tokens_before INTEGER NOT NULL,
    tokens_after  INTEGER NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('auto', 'manual')),
    focus         TEXT,
    usage_json    TEXT NOT NULL,
    created_at    REAL NOT NULL,
    CHECK (end_index > first_index AND first_index >= 0)
);
CREATE INDEX compactions_session ON compactions(session_id, end_index)
"""

# session_admissions without AUTOINCREMENT. Its counter row in sqlite_sequence was
# rewritten at the end of every INSERT, even one that its ON CONFLICT skipped: a
# retry's group wrote a WAL frame and waited for an fsync although it changed no
# row. ``seq`` only orders the ledger (SPEC §4), and a rowid one above the largest
# already does that; a seq of a deleted session's last admission may come again.
_V8 = """
CREATE TABLE session_admissions_v8 (
    seq               INTEGER PRIMARY KEY,
    admission_id      TEXT NOT NULL UNIQUE,
    target_session_id TEXT NOT NULL REFERENCES sessions(session_id),
    principal_id      TEXT NOT NULL,
    request_id        TEXT NOT NULL,
    payload_json      TEXT NOT NULL,
    payload_digest    TEXT NOT NULL,
    status            TEXT NOT NULL
                      CHECK (status IN ('queued', 'started', 'unknown', 'terminal')),
    outcome           TEXT
                      CHECK (outcome IN ('completed', 'failed', 'cancelled', 'interrupted')),
    result_json       TEXT,
    owner_epoch       INTEGER NOT NULL,
    created_at        REAL NOT NULL,
    started_at        REAL,
    finished_at       REAL,
    UNIQUE (principal_id, target_session_id, request_id),
    CHECK ((status = 'terminal') = (outcome IS NOT NULL))
);
INSERT INTO session_admissions_v8 (seq, admission_id, target_session_id, principal_id, request_id, payload_json, payload_digest, status, outcome, result_json, owner_epoch, created_at, started_at, finished_at)
    SELECT seq, admission_id, target_session_id, principal_id, request_id, payload_json, payload_digest, status, outcome, result_json, owner_epoch, created_at, started_at, finished_at FROM session_admissions;
DROP TABLE session_admissions;
ALTER TABLE session_admissions_v8 RENAME TO session_admissions;
CREATE INDEX admissions_open ON session_admissions(target_session_id, seq)
    WHERE status != 'terminal'
"""

MIGRATIONS: tuple[str, ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8)
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring ``conn``'s file to SCHEMA_VERSION; return the version it started at.

    A file newer than this code is refused rather than guessed at.
    """
    (start,) = conn.execute("PRAGMA user_version").fetchone()
    if start > SCHEMA_VERSION:
        raise sqlite3.DatabaseError(
            f"state.db has schema version {start}, newer than this tether ({SCHEMA_VERSION})"
        )
    for version in range(start + 1, SCHEMA_VERSION + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in MIGRATIONS[version - 1].split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version={version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return start
