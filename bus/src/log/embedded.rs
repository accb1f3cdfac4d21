//! Embedded backend of the event log (to be written).
