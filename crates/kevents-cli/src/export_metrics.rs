//! The metric families of `kevents export` (docs/metrics.md, "The export's metrics"): each
//! described (`# HELP`) and registered at zero when the metrics listener starts, so a replica
//! that does not lead (or has not exported anything yet) serves every family, not an empty
//! body. The counters themselves are raised by kevents-export's run loop and `export_cmd`.

/// A family's name, type, label (name and every value it takes) and help text.
struct Family {
    name: &'static str,
    kind: Kind,
    label: Option<(&'static str, &'static [&'static str])>,
    help: &'static str,
}

enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Every family the export serves. A test (`tests/deploy_real_apiserver.rs`) checks that
/// every `kevents_export_*` name in kevents-export and `export_cmd.rs` is here.
const FAMILIES: &[Family] = &[
    Family {
        name: "kevents_export_records_total",
        kind: Kind::Counter,
        label: None,
        help: "Records stored in the stream (one per change of an event's count).",
    },
    Family {
        name: "kevents_export_occurrences_total",
        kind: Kind::Counter,
        label: None,
        help: "Occurrences the stored records carry (the sum of their deltas).",
    },
    Family {
        name: "kevents_export_lag_seconds",
        kind: Kind::Histogram,
        label: None,
        help: "From an event's last time to the storing of its record, seconds.",
    },
    Family {
        name: "kevents_export_live_events",
        kind: Kind::Gauge,
        label: None,
        help: "Events the run knows now (uid and last exported count each).",
    },
    Family {
        name: "kevents_export_relists_total",
        kind: Kind::Counter,
        label: None,
        help: "Lists started again after a 410 Gone (the watch fell behind).",
    },
    Family {
        name: "kevents_export_watch_restarts_total",
        kind: Kind::Counter,
        label: None,
        help: "Watches started again from the last resourceVersion after they ended.",
    },
    Family {
        name: "kevents_export_watch_failures_total",
        kind: Kind::Counter,
        label: None,
        help: "List or watch requests that failed (retried after a back-off).",
    },
    Family {
        name: "kevents_export_incomplete_occurrences_total",
        kind: Kind::Counter,
        label: Some(("cause", &["before_start", "watch_gap"])),
        help: "Occurrences whose moment the history cannot keep: before the export began, or read by a relist after a watch gap.",
    },
    Family {
        name: "kevents_export_incomplete_events_total",
        kind: Kind::Counter,
        label: Some(("cause", &["deleted_unread"])),
        help: "Events deleted or expired while no watch read them.",
    },
    Family {
        name: "kevents_export_malformed_objects_total",
        kind: Kind::Counter,
        label: Some(("why", &["no_uid", "count", "uid_reused"])),
        help: "Listed or watched objects that give no record: no metadata.uid, a count outside 0..2^31-1, or the uid of an event exported from another namespace.",
    },
    Family {
        name: "kevents_export_count_decreases_total",
        kind: Kind::Counter,
        label: None,
        help: "Events whose count was read lower than the count already exported (each event once).",
    },
    Family {
        name: "kevents_export_fenced_total",
        kind: Kind::Counter,
        label: None,
        help: "Writes refused by the stream's fence: this replica had been deposed.",
    },
    Family {
        name: "kevents_export_leader",
        kind: Kind::Gauge,
        label: None,
        help: "1 while this replica holds the Lease and exports, 0 on a standby (1 without --leader-elect).",
    },
    Family {
        name: "kevents_export_leader_changes_total",
        kind: Kind::Counter,
        label: None,
        help: "Terms this replica began as the Lease's holder.",
    },
    Family {
        name: "kevents_export_shards_led",
        kind: Kind::Gauge,
        label: None,
        help: "Shards this replica leads now (--shards; every shard without --leader-elect).",
    },
    Family {
        name: "kevents_export_shard_led",
        kind: Kind::Gauge,
        // One series per shard, registered when the shards are known (src/export_shards.rs).
        label: Some(("shard", &[])),
        help: "1 while this replica leads the shard, else 0 (--shards).",
    },
    Family {
        name: "kevents_export_shard_records_total",
        kind: Kind::Counter,
        label: Some(("shard", &[])),
        help: "Records this replica stored in the shard's stream (--shards).",
    },
    Family {
        name: "kevents_export_shard_server_filtered",
        kind: Kind::Gauge,
        label: Some(("shard", &[])),
        help: "1 when the apiserver filtered the shard's last list by its shardSelector (KEP-5866), 0 when the export filtered every event itself (--shards).",
    },
    Family {
        name: "kevents_export_otlp_requests_total",
        kind: Kind::Counter,
        label: Some(("outcome", &["accepted", "refused", "failed"])),
        help: "OTLP/HTTP requests that ended: accepted (2xx), refused (not retried), failed (retried until the retry deadline).",
    },
    Family {
        name: "kevents_export_otlp_retries_total",
        kind: Kind::Counter,
        label: Some(("cause", &["429", "503", "5xx", "transport"])),
        help: "OTLP/HTTP requests retried, by cause.",
    },
    Family {
        name: "kevents_export_feed_records_total",
        kind: Kind::Counter,
        label: Some(("feed", &["otlp", "webhook"])),
        help: "Records a feed from the stream delivered (its position saved after them).",
    },
    Family {
        name: "kevents_export_feed_failures_total",
        kind: Kind::Counter,
        label: Some(("feed", &["otlp", "webhook"])),
        help: "Feeds from the stream that failed and start again from their saved position.",
    },
];

/// Describes every family and registers each (every label value) at zero in the installed
/// recorder. Call it once, right after the recorder is installed; `leading` is the
/// `kevents_export_leader` value to start with (0 with `--leader-elect`, 1 without).
pub fn register(leading: bool) {
    for f in FAMILIES {
        let labels: Vec<Vec<metrics::Label>> = match f.label {
            None => vec![Vec::new()],
            Some((key, values)) => values
                .iter()
                .map(|v| vec![metrics::Label::new(key, *v)])
                .collect(),
        };
        match f.kind {
            Kind::Counter => {
                metrics::describe_counter!(f.name, f.help);
                for l in &labels {
                    metrics::counter!(f.name, l.clone()).absolute(0);
                }
            }
            Kind::Gauge => {
                metrics::describe_gauge!(f.name, f.help);
                let value = if f.name == "kevents_export_leader" && leading {
                    1.0
                } else {
                    0.0
                };
                for l in &labels {
                    metrics::gauge!(f.name, l.clone()).set(value);
                }
            }
            Kind::Histogram => {
                metrics::describe_histogram!(f.name, metrics::Unit::Seconds, f.help);
                for l in &labels {
                    // Registered without a sample: served as an empty summary.
                    drop(metrics::histogram!(f.name, l.clone()));
                }
            }
        }
    }
}
