//! Checks the Grafana dashboards and provisioning against reality. One test binary (modules,
//! not files) because the live test links the whole bus and the 2-core build box pays per link.
//!
//! - `static_checks`: columns listed per SQL panel, PromQL against the contract allow-list and
//!   promtool, provisioning, well-formedness, docs.
//! - `fixture_rows`: every PostgreSQL panel against hand-written rows with exact numbers.
//! - `live_workload` (+ `live_bus`, `live_directives`): a real bus (JetStream + PostgreSQL, every role) driven
//!   through its API; every PostgreSQL panel against the database it filled, every PromQL
//!   expression against its real `/metrics` scrape.
//! - `panels`: running the SQL panels as Grafana would, shared by both database tests.
//!
//! Deliberately does not start Grafana or Prometheus: their query languages are checked by
//! running the SQL on PostgreSQL and the PromQL through promtool and a real scrape.

mod fixture_rows;
mod live_bus;
mod live_directives;
mod live_workload;
mod panels;
mod static_checks;
