-- Events the projector could not apply and skipped (docs/operations.md, "Dead letters"): one row
-- per event, derived from the stream like every other table here, so a rebuild that meets the
-- same event records it again. The checkpoint moves past a dead letter; nothing else does.
CREATE TABLE projection_dead_letters (
    projection  text        NOT NULL,
    seq         bigint      NOT NULL,  -- the event's stream sequence
    subject     text        NOT NULL,
    event_type  text        NOT NULL,  -- `unknown` when the event could not be decoded
    reason      text        NOT NULL,
    recorded_at timestamptz NOT NULL,
    PRIMARY KEY (projection, seq)
);
