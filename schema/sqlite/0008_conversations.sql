-- Conversations (CONTRACT §16): the signals of one correlation id, archived ones too, as
-- signal_queue's ix_signal_queue_correlation_id finds the hot ones.
CREATE INDEX ix_signal_history_correlation_id ON signal_history (correlation_id)
    WHERE correlation_id IS NOT NULL;
