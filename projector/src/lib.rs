//! The query side of signalbus: read models built from events. (filled by the projector issue)
