-- Events the projector could not apply and skipped: see schema/postgres.
CREATE TABLE projection_dead_letters (
    projection  text    NOT NULL,
    seq         integer NOT NULL,
    subject     text    NOT NULL,
    event_type  text    NOT NULL,
    reason      text    NOT NULL,
    recorded_at text    NOT NULL,
    PRIMARY KEY (projection, seq)
);
