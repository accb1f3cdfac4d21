-- signalbus read models (CONTRACT §10). Every table here is derived from the event stream and
-- can be rebuilt from it; nothing here is a source of truth. Names are unqualified on purpose:
-- the rebuild runs this same file inside a scratch schema (via search_path) and swaps the
-- result in, so the file must not pin a schema.

CREATE TABLE signal_queue (
    id                  uuid PRIMARY KEY,
    tenant              text        NOT NULL,
    from_identity       text        NOT NULL,
    to_identity         text        NOT NULL,
    signal_type         text        NOT NULL,
    category            text        NOT NULL,
    priority            smallint    NOT NULL,
    payload             jsonb       NOT NULL,
    delivery_class      varchar(8)  NOT NULL DEFAULT 'async',
    recipient_state     varchar(24) NOT NULL,
    publish_path        varchar(24),
    correlation_id      varchar(64),
    created_at          timestamptz NOT NULL,
    expires_at          timestamptz,
    delivered_at        timestamptz,
    expired_at          timestamptz,
    recalled_at         timestamptz,
    delivered_via       varchar(16),
    resolved_to_session uuid,
    acked_at            timestamptz,
    last_event_seq      bigint      NOT NULL
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
    id                  uuid PRIMARY KEY,
    tenant              text        NOT NULL,
    from_identity       text        NOT NULL,
    to_identity         text        NOT NULL,
    signal_type         text        NOT NULL,
    category            text        NOT NULL,
    priority            smallint    NOT NULL,
    payload             jsonb       NOT NULL,
    delivery_class      varchar(8)  NOT NULL DEFAULT 'async',
    recipient_state     varchar(24) NOT NULL,
    publish_path        varchar(24),
    correlation_id      varchar(64),
    created_at          timestamptz NOT NULL,
    expires_at          timestamptz,
    delivered_at        timestamptz,
    expired_at          timestamptz,
    recalled_at         timestamptz,
    delivered_via       varchar(16),
    resolved_to_session uuid,
    acked_at            timestamptz,
    last_event_seq      bigint      NOT NULL,
    archived_at         timestamptz NOT NULL
);

CREATE INDEX ix_signal_history_from ON signal_history (tenant, from_identity, created_at DESC, id DESC);
CREATE INDEX ix_signal_history_to ON signal_history (tenant, to_identity, created_at DESC, id DESC);

-- No token hash: secrets never reach a read model.
CREATE TABLE agents (
    tenant        text        NOT NULL,
    identity      text        NOT NULL,
    kind          varchar(16) NOT NULL,
    registered_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, identity)
);

CREATE TABLE agent_sessions (
    session_id     uuid PRIMARY KEY,
    tenant         text        NOT NULL,
    identity       text        NOT NULL,
    kind           varchar(16) NOT NULL,
    surface        varchar(16) NOT NULL,
    node           text        NOT NULL,
    opened_at      timestamptz NOT NULL,
    last_heartbeat timestamptz NOT NULL,
    released_at    timestamptz
);

-- Recipient state is computed from open sessions only.
CREATE INDEX ix_agent_sessions_open ON agent_sessions (tenant, identity) WHERE released_at IS NULL;
CREATE INDEX ix_agent_sessions_identity ON agent_sessions (tenant, identity);

CREATE TABLE recipient_state (
    tenant         text        NOT NULL,
    identity       text        NOT NULL,
    state          varchar(24) NOT NULL,
    live_sessions  integer     NOT NULL,
    last_heartbeat timestamptz,
    PRIMARY KEY (tenant, identity)
);

CREATE TABLE plugin_facts (
    tenant      text        NOT NULL,
    plugin_name text        NOT NULL,
    seq         bigint      NOT NULL,
    fact_type   text        NOT NULL,
    fact        jsonb       NOT NULL,
    recorded_by text        NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant, plugin_name, seq)
);

CREATE TABLE plugin_state (
    tenant      text        NOT NULL,
    plugin_name text        NOT NULL,
    state       jsonb       NOT NULL,
    seq         bigint      NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant, plugin_name)
);

CREATE TABLE projection_checkpoints (
    projection text        PRIMARY KEY,
    last_seq   bigint      NOT NULL,
    updated_at timestamptz NOT NULL
);

-- The row exists from the start so every batch can compare-and-set it.
INSERT INTO projection_checkpoints (projection, last_seq, updated_at) VALUES ('read_models', 0, now());
