-- Directives, embedded mode: the same tables, columns and indexes as schema/postgres (ids,
-- JSON and timestamps as text, as in 0001).

CREATE TABLE directives (
    directive_id    text PRIMARY KEY,
    tenant          text    NOT NULL,
    issuer          text    NOT NULL,
    assignee        text    NOT NULL,
    claimed_by      text,
    directive_type  text    NOT NULL,
    params          text    NOT NULL,
    status          text    NOT NULL,
    idempotency_key text    NOT NULL,
    correlation_id  text,
    created_at      text    NOT NULL,
    deadline        text    NOT NULL,
    started_at      text,
    finished_at     text,
    progress        text,
    result          text,
    failure         text,
    reason          text,
    declined_by     text    NOT NULL DEFAULT '[]',
    last_event_seq  integer NOT NULL
);

CREATE INDEX ix_directives_assignee_open ON directives (tenant, assignee, created_at DESC)
    WHERE (status = 'requested' OR status = 'started');

CREATE INDEX ix_directives_issuer ON directives (tenant, issuer, created_at DESC, directive_id DESC);

CREATE INDEX ix_directives_open_deadline ON directives (deadline, directive_id)
    WHERE (status = 'requested' OR status = 'started');

CREATE INDEX ix_directives_finished ON directives (finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE directive_candidates (
    directive_id text NOT NULL,
    tenant       text NOT NULL,
    identity     text NOT NULL,
    PRIMARY KEY (directive_id, identity)
);

CREATE INDEX ix_directive_candidates_identity ON directive_candidates (tenant, identity, directive_id);
