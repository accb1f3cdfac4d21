-- Directives (CONTRACT §14): one row per directive, folded from the events on its subject;
-- derived from the stream like every read model here, so a rebuild recreates it exactly.
-- `directive_candidates` lists who was handed each directive (the assignee, or the group's
-- members at creation less the issuer), so "assigned to me" includes group directives.

CREATE TABLE directives (
    directive_id    uuid PRIMARY KEY,
    tenant          text        NOT NULL,
    issuer          text        NOT NULL,
    assignee        text        NOT NULL,
    claimed_by      text,
    directive_type  text        NOT NULL,
    params          jsonb       NOT NULL,
    status          varchar(16) NOT NULL,
    idempotency_key text        NOT NULL,
    correlation_id  varchar(64),
    created_at      timestamptz NOT NULL,
    deadline        timestamptz NOT NULL,
    started_at      timestamptz,
    finished_at     timestamptz,
    progress        jsonb,
    result          jsonb,
    failure         jsonb,
    reason          text,
    declined_by     jsonb       NOT NULL DEFAULT '[]',
    last_event_seq  bigint      NOT NULL
);

-- An assignee's open directives.
CREATE INDEX ix_directives_assignee_open ON directives (tenant, assignee, created_at DESC)
    WHERE (status = 'requested' OR status = 'started');

-- An issuer's directives, newest first.
CREATE INDEX ix_directives_issuer ON directives (tenant, issuer, created_at DESC, directive_id DESC);

-- Open directives by deadline: the sweeper's expiry scan.
CREATE INDEX ix_directives_open_deadline ON directives (deadline, directive_id)
    WHERE (status = 'requested' OR status = 'started');

-- Retention: terminal rows by when they ended.
CREATE INDEX ix_directives_finished ON directives (finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE directive_candidates (
    directive_id uuid NOT NULL,
    tenant       text NOT NULL,
    identity     text NOT NULL,
    PRIMARY KEY (directive_id, identity)
);

CREATE INDEX ix_directive_candidates_identity ON directive_candidates (tenant, identity, directive_id);
