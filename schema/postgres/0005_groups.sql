-- Groups and fan-out (CONTRACT §15), derived from the `group.*` events like every table here.
-- Group names are stored with their `@`, as the events carry them.
CREATE TABLE groups (
    tenant      text        NOT NULL,
    group_name  text        NOT NULL,
    self_join   boolean     NOT NULL,
    announce    boolean     NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant, group_name)
);

CREATE TABLE group_members (
    tenant      text        NOT NULL,
    group_name  text        NOT NULL,
    identity    text        NOT NULL,
    added_at    timestamptz NOT NULL,
    added_by    text        NOT NULL,
    PRIMARY KEY (tenant, group_name, identity)
);

-- An agent's groups, for its removal from every one of them.
CREATE INDEX ix_group_members_identity ON group_members (tenant, identity);

-- The send to a group each member's signal belongs to; recalled together by the sender.
ALTER TABLE signal_queue ADD COLUMN fanout_id uuid;
ALTER TABLE signal_history ADD COLUMN fanout_id uuid;
CREATE INDEX ix_signal_queue_fanout_id ON signal_queue (fanout_id) WHERE fanout_id IS NOT NULL;
CREATE INDEX ix_signal_history_fanout_id ON signal_history (fanout_id) WHERE fanout_id IS NOT NULL;
