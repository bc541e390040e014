//! Builds a history stream for `kevents history`'s benchmark (scripts/bench/history.sh):
//! RECORDS records (`ExportRecord` JSON, a subject per event, as `kevents export` writes
//! them) published straight into a JetStream stream, with acknowledgements pipelined, their
//! `lastTime`s spread evenly over the SPAN_HOURS hours before now. 1 % of the records belong
//! to the two events of one crash-looping pod (`web/pod/web-0`: BackOff and Unhealthy); the
//! others to EVENTS events spread over 50 namespaces.
//!
//! ```text
//! cargo run --release -p kevents-cli --example history_fill -- nats://127.0.0.1:4222 bench 1000000 50000 24
//! ```
//!
//! Prints one JSON line: what was written, when the span ends, and what `kevents history
//! --for pod/web-0 -n web --from END-1h --to END` must answer (each event's occurrences in
//! that hour and its last count there).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use kevents_core::{Clock, SystemClock, Time};
use kevents_export::{ExportRecord, JetStream, JetStreamConfig, Regarding};

fn arg<T: std::str::FromStr>(args: &[String], i: usize, default: T) -> T {
    args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let url = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "nats://127.0.0.1:4222".into());
    let stream = args.get(2).cloned().unwrap_or_else(|| "bench".into());
    let records: u64 = arg(&args, 3, 1_000_000);
    let events: u64 = arg(&args, 4, 50_000).max(1);
    let hours: u64 = arg(&args, 5, 24).max(1);

    let client = kevents_export::async_nats::connect(url.as_str()).await?;
    let js = JetStream::open(client, JetStreamConfig::new(&stream)).await?;
    let context = js.context().clone();

    let end = SystemClock.now();
    let span_ns = (hours * 3600 * 1_000_000_000) as i64;
    let start = Time::from_unix_nanos(end.unix_nanos() - span_ns);
    let hour_ago = Time::from_unix_nanos(end.unix_nanos() - 3_600_000_000_000);
    // Per event: its count and its first time; event 0 and 1 are web-0's.
    let mut counts = vec![0u64; events as usize + 2];
    let mut firsts: Vec<Option<String>> = vec![None; events as usize + 2];
    // web-0's events in the last hour: (occurrences, last count).
    let mut expected = [(0u64, 0u64); 2];
    let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut acks = VecDeque::new();
    let began = Instant::now();
    for j in 0..records {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let at = Time::from_unix_nanos(
            start.unix_nanos() + (span_ns as i128 * j as i128 / records as i128) as i64,
        );
        let e = if rng.is_multiple_of(100) {
            (rng >> 8) % 2
        } else {
            2 + (rng >> 8) % events
        };
        let delta = 1 + (rng >> 20) % 3;
        counts[e as usize] += delta;
        let last_time = at.to_rfc3339_micros();
        let first_time = firsts[e as usize]
            .get_or_insert_with(|| last_time.clone())
            .clone();
        let (namespace, pod, reason, note, type_) = match e {
            0 => (
                "web".to_owned(),
                "web-0".to_owned(),
                "BackOff",
                "Back-off restarting failed container app in pod web-0",
                "Warning",
            ),
            1 => (
                "web".to_owned(),
                "web-0".to_owned(),
                "Unhealthy",
                "Liveness probe failed: HTTP probe failed with statuscode: 500",
                "Warning",
            ),
            _ => (
                format!("ns-{}", e % 50),
                format!("pod-{e}"),
                ["Pulled", "Created", "Started", "BackOff", "Unhealthy"][(e % 5) as usize],
                "Container image \"registry.example.com/app:1.2.3\" already present on machine",
                "Normal",
            ),
        };
        if e < 2 && at >= hour_ago {
            expected[e as usize].0 += delta;
            expected[e as usize].1 = counts[e as usize];
        }
        let uid = format!("00000000-0000-4000-8000-{e:012}");
        let record = ExportRecord {
            uid: uid.clone(),
            api: Some("v1".into()),
            namespace: namespace.clone(),
            name: format!("{pod}.{e:016x}"),
            regarding: Regarding {
                kind: "Pod".into(),
                namespace: namespace.clone(),
                name: pod,
                uid: format!("10000000-0000-4000-8000-{e:012}"),
                ..Default::default()
            },
            reason: reason.into(),
            type_: type_.into(),
            note: note.into(),
            action: String::new(),
            reporting_controller: "kubelet".into(),
            reporting_instance: format!("node-{}", e % 20),
            first_time: Some(first_time),
            last_time: Some(last_time),
            count: counts[e as usize],
            delta,
            resource_version: (1000 + j).to_string(),
            ..Default::default()
        };
        let subject = format!("{stream}.{namespace}.{uid}");
        let ack = context
            .publish(subject, serde_json::to_vec(&record)?.into())
            .await?;
        acks.push_back(ack);
        if acks.len() >= 4096
            && let Some(ack) = acks.pop_front()
        {
            ack.await?;
        }
    }
    for ack in acks {
        ack.await?;
    }
    let took = began.elapsed().max(Duration::from_millis(1));
    println!(
        "{}",
        serde_json::json!({
            "stream": stream,
            "records": records,
            "events": events + 2,
            "seconds": took.as_secs_f64(),
            "records_per_second": (records as f64 / took.as_secs_f64()).round(),
            "end": end.to_rfc3339_micros(),
            "hour_before_end": hour_ago.to_rfc3339_micros(),
            "web_0": {
                "BackOff": {"occurrences": expected[0].0, "count": expected[0].1},
                "Unhealthy": {"occurrences": expected[1].0, "count": expected[1].1},
            },
        })
    );
    Ok(())
}
