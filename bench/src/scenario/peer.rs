//! `peer`: the `throughput` workload (or, with `--latency-rate`, the `latency` one) on RabbitMQ
//! and then on signalbus, `--rounds` times interleaved (R S R S …) so a busy machine's noise
//! hits both, and the ratios between them: `"peer_ratio"` = signalbus delivered signals/s ÷
//! RabbitMQ delivered messages/s, and, flat out, `"raw_ratio"` = signalbus signals/s ÷ the raw
//! JetStream baseline's msg/s measured after each signalbus run.
//!
//! Deliberately just orchestration and arithmetic: the RabbitMQ workload lives in `peer/`, the
//! signalbus one in `traffic::one_mode` (unchanged), and no ratio is judged here.

use serde_json::{json, Value};

use crate::args::Args;
use crate::peer;
use crate::report::{round, Outcome};
use crate::scenario::traffic;

/// What one system did in one round, read off its JSON.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Side {
    delivered_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
}

impl Side {
    fn from_json(v: &Value) -> Side {
        let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
        Side {
            delivered_per_s: f(&v["delivered_per_s"]),
            p50_ms: f(&v["latency"]["p50_ms"]),
            p99_ms: f(&v["latency"]["p99_ms"]),
        }
    }

    fn json(&self) -> Value {
        json!({
            "delivered_per_s": round(self.delivered_per_s, 1),
            "p50_ms": round(self.p50_ms, 3),
            "p99_ms": round(self.p99_ms, 3),
        })
    }
}

/// One round: both systems, and the raw baseline when it ran.
#[derive(Debug, Clone, Copy)]
struct Round {
    signalbus: Side,
    rabbitmq: Side,
    raw_per_s: Option<f64>,
}

impl Round {
    fn from_json(signalbus: &Value, rabbitmq: &Value) -> Round {
        Round {
            signalbus: Side::from_json(signalbus),
            rabbitmq: Side::from_json(rabbitmq),
            raw_per_s: signalbus["raw"]["events_per_s"].as_f64(),
        }
    }

    fn peer_ratio(&self) -> f64 {
        round(self.signalbus.delivered_per_s / self.rabbitmq.delivered_per_s, 3)
    }
}

/// The rounds summed up: each field the mean over rounds; the ratios of those means.
#[derive(Debug, PartialEq)]
struct Summary {
    signalbus: Side,
    rabbitmq: Side,
    raw_per_s: Option<f64>,
    peer_ratio: f64,
    raw_ratio: Option<f64>,
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    sum / n.max(1) as f64
}

fn mean_side(sides: &[Side]) -> Side {
    Side {
        delivered_per_s: mean(sides.iter().map(|s| s.delivered_per_s)),
        p50_ms: mean(sides.iter().map(|s| s.p50_ms)),
        p99_ms: mean(sides.iter().map(|s| s.p99_ms)),
    }
}

impl Summary {
    fn of(rounds: &[Round]) -> Summary {
        let sb = mean_side(&rounds.iter().map(|r| r.signalbus).collect::<Vec<_>>());
        let rb = mean_side(&rounds.iter().map(|r| r.rabbitmq).collect::<Vec<_>>());
        // A raw ratio only when every round measured the baseline (flat-out runs).
        let raw_per_s = (!rounds.is_empty() && rounds.iter().all(|r| r.raw_per_s.is_some()))
            .then(|| mean(rounds.iter().filter_map(|r| r.raw_per_s)));
        Summary {
            signalbus: sb,
            rabbitmq: rb,
            raw_per_s,
            peer_ratio: round(sb.delivered_per_s / rb.delivered_per_s, 3),
            raw_ratio: raw_per_s.map(|raw| round(sb.delivered_per_s / raw, 4)),
        }
    }
}

pub async fn run(args: &Args) -> anyhow::Result<Outcome> {
    peer::check_available(&args.amqp_url).await?;
    let rate = args.latency_rate;
    let cfg = traffic::drive_config(args, rate);
    let mut rounds = Vec::new();
    let mut rounds_json = Vec::new();
    let mut summary = Vec::new();
    for i in 0..args.rounds.max(1) {
        tracing::info!(round = i + 1, "rabbitmq");
        let rb = peer::run(&args.amqp_url, &cfg, args.prefetch).await?.json();
        tracing::info!(round = i + 1, "signalbus");
        // The baseline only flat out: at a fixed rate there is no capacity to compare.
        let sb = traffic::one_mode(args, &cfg, args.embedded, rate.is_none()).await?;
        let r = Round::from_json(&sb.json, &rb);
        summary.push(format!(
            "round {}: RabbitMQ {} msg/s, p50 {} ms, p99 {} ms | signalbus {}\n  peer_ratio {}",
            i + 1,
            rb["delivered_per_s"],
            rb["latency"]["p50_ms"],
            rb["latency"]["p99_ms"],
            sb.summary,
            r.peer_ratio()
        ));
        rounds.push(r);
        rounds_json.push(json!({ "round": i + 1, "rabbitmq": rb, "signalbus": sb.json, "peer_ratio": r.peer_ratio() }));
    }
    let s = Summary::of(&rounds);
    let mut results = json!({
        "peer_ratio": s.peer_ratio,
        "raw_ratio": s.raw_ratio,
        "signalbus": s.signalbus.json(),
        "rabbitmq": s.rabbitmq.json(),
        "raw_per_s": s.raw_per_s.map(|r| round(r, 1)),
        "rounds": rounds_json,
    });
    if let Some(r) = rate {
        results["offered_per_s"] = json!(r);
    }
    let (sb, rb) = (s.signalbus, s.rabbitmq);
    let at = rate.map_or("flat out".to_string(), |r| format!("offered {r} /s"));
    summary.push(format!(
        "{at}, mean of {} round(s): signalbus {} signals/s, p50 {} ms, p99 {} ms; RabbitMQ {} msg/s, p50 {} ms, p99 {} ms",
        rounds.len(),
        round(sb.delivered_per_s, 1),
        round(sb.p50_ms, 3),
        round(sb.p99_ms, 3),
        round(rb.delivered_per_s, 1),
        round(rb.p50_ms, 3),
        round(rb.p99_ms, 3),
    ));
    // At a fixed rate both deliver what is offered: the ratio is 1 by construction, no target.
    let target = if rate.is_none() { " (target ≥ 2.0 in every round)" } else { "" };
    summary.push(format!("peer_ratio (signalbus ÷ RabbitMQ delivered/s) {}{target}", s.peer_ratio));
    if let Some(r) = s.raw_ratio {
        summary.push(format!("raw_ratio (signalbus signals/s ÷ raw JetStream msg/s) {r} (target ≥ 0.30)"));
    }
    Ok(Outcome { results, summary })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side_json(per_s: f64, p50: f64, p99: f64) -> Value {
        json!({"delivered_per_s": per_s, "latency": {"p50_ms": p50, "p99_ms": p99}})
    }

    #[test]
    fn ratios_are_of_the_means_over_rounds() {
        let mut sb1 = side_json(6000.0, 40.0, 100.0);
        sb1["raw"] = json!({"events_per_s": 80000.0});
        let mut sb2 = side_json(4000.0, 60.0, 140.0);
        sb2["raw"] = json!({"events_per_s": 120000.0});
        let rounds = [
            Round::from_json(&sb1, &side_json(8000.0, 8.0, 70.0)),
            Round::from_json(&sb2, &side_json(12000.0, 10.0, 90.0)),
        ];
        assert_eq!(rounds[0].peer_ratio(), 0.75);
        let s = Summary::of(&rounds);
        assert_eq!(s.signalbus, Side { delivered_per_s: 5000.0, p50_ms: 50.0, p99_ms: 120.0 });
        assert_eq!(s.rabbitmq, Side { delivered_per_s: 10000.0, p50_ms: 9.0, p99_ms: 80.0 });
        assert_eq!(s.peer_ratio, 0.5);
        assert_eq!(s.raw_per_s, Some(100000.0));
        assert_eq!(s.raw_ratio, Some(0.05));
    }

    #[test]
    fn no_raw_ratio_unless_every_round_measured_the_baseline() {
        let mut sb = side_json(5000.0, 2.0, 9.0);
        let paced = Round::from_json(&sb, &side_json(5000.0, 1.0, 4.0));
        sb["raw"] = json!({"events_per_s": 50000.0});
        let flat = Round::from_json(&sb, &side_json(5000.0, 1.0, 4.0));
        let s = Summary::of(&[paced, flat]);
        assert_eq!(s.peer_ratio, 1.0);
        assert_eq!((s.raw_per_s, s.raw_ratio), (None, None));
        assert_eq!(Summary::of(&[flat]).raw_ratio, Some(0.1));
    }
}
