//! The edge of signalbus: HTTP and WebSocket. (filled by the gateway issue)
