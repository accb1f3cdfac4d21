-- Groups and fan-out: see schema/postgres.
CREATE TABLE groups (
    tenant      text    NOT NULL,
    group_name  text    NOT NULL,
    self_join   integer NOT NULL,
    announce    integer NOT NULL,
    created_at  text    NOT NULL,
    PRIMARY KEY (tenant, group_name)
);

CREATE TABLE group_members (
    tenant      text NOT NULL,
    group_name  text NOT NULL,
    identity    text NOT NULL,
    added_at    text NOT NULL,
    added_by    text NOT NULL,
    PRIMARY KEY (tenant, group_name, identity)
);

CREATE INDEX ix_group_members_identity ON group_members (tenant, identity);

ALTER TABLE signal_queue ADD COLUMN fanout_id text;
ALTER TABLE signal_history ADD COLUMN fanout_id text;
CREATE INDEX ix_signal_queue_fanout_id ON signal_queue (fanout_id) WHERE fanout_id IS NOT NULL;
CREATE INDEX ix_signal_history_fanout_id ON signal_history (fanout_id) WHERE fanout_id IS NOT NULL;
