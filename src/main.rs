//! signalbus binary
fn main() {}
