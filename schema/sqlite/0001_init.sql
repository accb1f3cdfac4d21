-- signalbus read models, embedded mode (CONTRACT §10: the same table and column names as in
-- PostgreSQL). SQLite has no uuid/jsonb/timestamptz: ids are hyphenated text, JSON is text, and
-- timestamps are fixed-width UTC text (YYYY-MM-DDTHH:MM:SS.ffffffZ) so that text order is time
-- order and the partial indexes and ORDER BY work unchanged.

CREATE TABLE signal_queue (
    id                  text PRIMARY KEY,
    tenant              text        NOT NULL,
    from_identity       text        NOT NULL,
    to_identity         text        NOT NULL,
    signal_type         text        NOT NULL,
    category            text        NOT NULL,
    priority            integer    NOT NULL,
    payload             text       NOT NULL,
    delivery_class      text  NOT NULL DEFAULT 'async',
    recipient_state     text NOT NULL,
    publish_path        text,
    correlation_id      text,
    created_at          text NOT NULL,
    expires_at          text,
    delivered_at        text,
    expired_at          text,
    recalled_at         text,
    delivered_via       text,
    resolved_to_session text,
    acked_at            text,
    last_event_seq      integer      NOT NULL
);

-- SPEC-071 §8: the sweeper's scan of pending rows by expiry.
CREATE INDEX ix_signal_queue_expires_at ON signal_queue (expires_at)
    WHERE expires_at IS NOT NULL AND delivered_at IS NULL AND expired_at IS NULL AND recalled_at IS NULL;

-- SPEC-071 §8: future bulk recall by correlation id.
CREATE INDEX ix_signal_queue_correlation_id ON signal_queue (correlation_id)
    WHERE correlation_id IS NOT NULL;

-- Drain order (SPEC-071 §7) over pending rows only, so the index stays as small as the backlog.
CREATE INDEX ix_signal_queue_drain ON signal_queue (tenant, to_identity, priority DESC, created_at)
    WHERE delivered_at IS NULL AND expired_at IS NULL AND recalled_at IS NULL;

-- Delivered but unacked rows are the redelivery candidates of a drain (CONTRACT §5).
CREATE INDEX ix_signal_queue_unacked ON signal_queue (tenant, to_identity)
    WHERE delivered_at IS NOT NULL AND acked_at IS NULL;

-- Listing a caller's signals newest first, by either side.
CREATE INDEX ix_signal_queue_from ON signal_queue (tenant, from_identity, created_at DESC, id DESC);
CREATE INDEX ix_signal_queue_to ON signal_queue (tenant, to_identity, created_at DESC, id DESC);

CREATE TABLE signal_history (
    id                  text PRIMARY KEY,
    tenant              text        NOT NULL,
    from_identity       text        NOT NULL,
    to_identity         text        NOT NULL,
    signal_type         text        NOT NULL,
    category            text        NOT NULL,
    priority            integer    NOT NULL,
    payload             text       NOT NULL,
    delivery_class      text  NOT NULL DEFAULT 'async',
    recipient_state     text NOT NULL,
    publish_path        text,
    correlation_id      text,
    created_at          text NOT NULL,
    expires_at          text,
    delivered_at        text,
    expired_at          text,
    recalled_at         text,
    delivered_via       text,
    resolved_to_session text,
    acked_at            text,
    last_event_seq      integer      NOT NULL,
    archived_at         text NOT NULL
);

CREATE INDEX ix_signal_history_from ON signal_history (tenant, from_identity, created_at DESC, id DESC);
CREATE INDEX ix_signal_history_to ON signal_history (tenant, to_identity, created_at DESC, id DESC);

-- No token hash: secrets never reach a read model.
CREATE TABLE agents (
    tenant        text        NOT NULL,
    identity      text        NOT NULL,
    kind          text NOT NULL,
    registered_at text NOT NULL,
    PRIMARY KEY (tenant, identity)
);

CREATE TABLE agent_sessions (
    session_id     text PRIMARY KEY,
    tenant         text        NOT NULL,
    identity       text        NOT NULL,
    kind           text NOT NULL,
    surface        text NOT NULL,
    node           text        NOT NULL,
    opened_at      text NOT NULL,
    last_heartbeat text NOT NULL,
    released_at    text
);

-- Recipient state is computed from open sessions only.
CREATE INDEX ix_agent_sessions_open ON agent_sessions (tenant, identity) WHERE released_at IS NULL;
CREATE INDEX ix_agent_sessions_identity ON agent_sessions (tenant, identity);

CREATE TABLE recipient_state (
    tenant         text        NOT NULL,
    identity       text        NOT NULL,
    state          text NOT NULL,
    live_sessions  integer     NOT NULL,
    last_heartbeat text,
    PRIMARY KEY (tenant, identity)
);

CREATE TABLE plugin_facts (
    tenant      text        NOT NULL,
    plugin_name text        NOT NULL,
    seq         integer      NOT NULL,
    fact_type   text        NOT NULL,
    fact        text       NOT NULL,
    recorded_by text        NOT NULL,
    created_at  text NOT NULL,
    PRIMARY KEY (tenant, plugin_name, seq)
);

CREATE TABLE plugin_state (
    tenant      text        NOT NULL,
    plugin_name text        NOT NULL,
    state       text       NOT NULL,
    seq         integer      NOT NULL,
    updated_at  text NOT NULL,
    PRIMARY KEY (tenant, plugin_name)
);

CREATE TABLE projection_checkpoints (
    projection text        PRIMARY KEY,
    last_seq   integer      NOT NULL,
    updated_at text NOT NULL
);

-- The row exists from the start so every batch can compare-and-set it.
INSERT INTO projection_checkpoints (projection, last_seq, updated_at) VALUES ('read_models', 0, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
