//! `kevents history`: the exported history read back for a person, like `kubectl events`
//! but over the stream's whole retention: a window's events with their occurrences inside
//! it (kevents-export's `history` module), and `--follow` to tail the stream.

use std::time::Duration;

use clap::{Args, ValueEnum};
use kevents_core::{Clock as _, SystemClock, Time};
use kevents_export::history::{
    EventHistory, HistoryQuery, HistoryRead, HistoryReader, HistoryTable, ObjectFilter,
};

use crate::cluster::{self, Failure, FailureKind};
use crate::demo::table::{MAX_OBJECT, MAX_REASON, MAX_TYPE, human_duration};
use crate::nats_conn::NatsArgs;
use crate::sanitize;

/// How the events are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// LAST SEEN, TYPE, REASON, OBJECT, OCCURRENCES, MESSAGE (and NAMESPACE first without
    /// `-n`), as `kubectl events`.
    Table,
    /// The table with the namespace, the last count, the first time and the source.
    Wide,
    /// One JSON object a line per event.
    Json,
}

#[derive(Args, Debug, Clone)]
pub struct HistoryArgs {
    /// NATS: the servers, credentials and TLS.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// The stream `kevents export --stream` writes.
    #[arg(long, default_value = "export")]
    pub stream: String,
    /// Only this namespace's events (default: every namespace).
    #[arg(long = "namespace", short = 'n')]
    pub namespace: Option<String>,
    /// Only the events about this object: KIND/NAME (`pod/web-1`, `deploy/web`), as
    /// `kubectl events --for`.
    #[arg(long = "for", value_name = "KIND/NAME")]
    pub object: Option<String>,
    /// Only the events with this reason.
    #[arg(long)]
    pub reason: Option<String>,
    /// The window: the last DURATION (`90s`, `30m`, `24h`, `7d`, `1h30m`); default 1h.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with_all = ["from", "to"])]
    pub since: Option<Duration>,
    /// The window's start, RFC 3339 (`2026-12-07T10:00:00Z`).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub from: Option<Time>,
    /// The window's end, RFC 3339 (default: now).
    #[arg(long, value_name = "TIME", value_parser = parse_time, requires = "from", conflicts_with = "follow")]
    pub to: Option<Time>,
    /// How much older than its export a record's last time can be: the apiserver's
    /// `--event-ttl` (1h by default); the read starts this much before the window.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "1h")]
    pub lag: Duration,
    /// The output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// After the window, print every new record as it is stored (one line each: its new
    /// occurrences and its count), until SIGTERM or Ctrl-C.
    #[arg(long, short = 'f')]
    pub follow: bool,
}

/// `90s`, `30m`, `24h`, `7d`, `1h30m`: a positive duration of at most 10 years.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration like 90s, 30m, 24h, 7d or 1h30m");
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in s.trim().chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err(bad()),
        };
        let n: u64 = digits.parse().map_err(|_| bad())?;
        digits.clear();
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
    }
    if !digits.is_empty() || total == 0 {
        return Err(bad());
    }
    if total > 10 * 365 * 86_400 {
        return Err(format!("{s:?} is longer than 10 years"));
    }
    Ok(Duration::from_secs(total))
}

fn parse_time(s: &str) -> Result<Time, String> {
    Time::parse_rfc3339(s)
        .map_err(|_| format!("{s:?} is not an RFC 3339 time like 2026-12-07T10:00:00Z"))
}

fn usage(message: impl std::fmt::Display) -> anyhow::Error {
    Failure::new(FailureKind::Config, message).into()
}

pub fn run(args: HistoryArgs) -> anyhow::Result<()> {
    cluster::finish(actix::System::new().block_on(run_async(args)))
}

/// The query the options describe (usage errors exit 2, before anything connects).
fn query(args: &HistoryArgs, now: Time) -> anyhow::Result<HistoryQuery> {
    if let Some(ns) = &args.namespace {
        cluster::validate_namespace(ns)?;
    }
    kevents_export::JetStreamConfig::new(&args.stream)
        .validate()
        .map_err(|e| usage(format!("--stream: {e}")))?;
    let from = match (args.from, args.since) {
        (Some(from), _) => from,
        (None, since) => {
            let since = since.unwrap_or(Duration::from_secs(3600));
            Time::from_unix_nanos(
                now.unix_nanos()
                    .saturating_sub(i64::try_from(since.as_nanos()).unwrap_or(i64::MAX)),
            )
        }
    };
    if let Some(to) = args.to
        && to < from
    {
        return Err(usage("--to is before --from"));
    }
    let mut query = HistoryQuery::new(&args.stream, from);
    query.namespace = args.namespace.clone();
    query.object = match &args.object {
        Some(o) => Some(ObjectFilter::parse(o).map_err(|e| usage(format!("--for: {e}")))?),
        None => None,
    };
    query.reason = args.reason.clone();
    query.to = args.to;
    query.lag = args.lag;
    Ok(query)
}

async fn run_async(args: HistoryArgs) -> anyhow::Result<()> {
    let now = SystemClock.now();
    let query = query(&args, now)?;
    let target = args.nats.resolve()?;
    let nats = target.connect("kevents history").await?;
    let context = kevents_export::async_nats::jetstream::new(nats);
    let failure = |e: kevents_export::ExportError| -> anyhow::Error {
        match e {
            kevents_export::ExportError::Store(_) => Failure::new(
                FailureKind::Store,
                format!("NATS at {}: {e}", target.shown()),
            )
            .into(),
            e => e.into(),
        }
    };
    // An export written with --shards N is N streams `{stream}-{i}of{N}`: each read, and the
    // window's events merged (the table orders them by time); following, records are printed
    // as each stream stores them.
    let streams = match kevents_export::shard::layout(&context, &args.stream)
        .await
        .map_err(failure)?
    {
        kevents_export::shard::Layout::Sharded(n) => kevents_export::Shard::all(n)
            .map_err(failure)?
            .iter()
            .map(|s| s.stream(&args.stream))
            .collect(),
        _ => vec![args.stream.clone()],
    };
    let mut readers = Vec::new();
    for name in &streams {
        let mut query = query.clone();
        query.stream = name.clone();
        query.subject_prefix = name.clone();
        let reader = HistoryReader::open(&context, query, args.follow)
            .await
            .map_err(failure)?;
        tracing::debug!(
            stream = %name,
            start = reader.start_sequence(),
            "reading the history from this sequence"
        );
        readers.push(reader);
    }
    let printer = Printer::new(args.output, args.namespace.is_none());
    let mut out = std::io::stdout().lock();
    let mut table = HistoryTable::new(query.max_events);
    // The window, up to the end of each stream as it was when the command began.
    for reader in &mut readers {
        while let Some(HistoryRead::Record(item)) = reader.next().await.map_err(failure)? {
            table.add(*item).map_err(failure)?;
        }
    }
    let events = table.into_events();
    let header = !events.is_empty() || args.follow;
    let widths = printer.print(&mut out, &events, SystemClock.now(), None, header)?;
    let skipped: u64 = readers.iter().map(HistoryReader::skipped).sum();
    if skipped > 0 {
        eprintln!("history: {skipped} messages on record subjects were not records; skipped");
    }
    if !args.follow {
        if events.is_empty() && args.output != Output::Json {
            eprintln!("No events in the window.");
        }
        return Ok(());
    }
    drop(out);
    let stop = terminated();
    tokio::pin!(stop);
    // Every stream's reader feeds one channel (a task each).
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let mut tasks = Vec::new();
    for mut reader in readers {
        let tx = tx.clone();
        tasks.push(tokio::task::spawn_local(async move {
            loop {
                let read = reader.next().await;
                let end = !matches!(read, Ok(Some(_)));
                if tx.send(read).await.is_err() || end {
                    return;
                }
            }
        }));
    }
    drop(tx);
    let _abort = AbortOnDrop(tasks);
    loop {
        tokio::select! {
            _ = &mut stop => return Ok(()),
            read = rx.recv() => match read.unwrap_or(Ok(None)).map_err(failure)? {
                Some(HistoryRead::Record(item)) => {
                    let event = EventHistory::of(&item);
                    let mut out = std::io::stdout().lock();
                    printer.print(&mut out, std::slice::from_ref(&event), SystemClock.now(), Some(&widths), false)?;
                }
                Some(HistoryRead::CaughtUp) => {}
                None => return Ok(()),
            }
        }
    }
}

/// Aborts the followers' tasks when the command ends.
struct AbortOnDrop(Vec<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// Longest MESSAGE cell shown in the table (characters).
const MAX_MESSAGE: usize = 120;

struct Printer {
    output: Output,
    all_namespaces: bool,
}

impl Printer {
    fn new(output: Output, all_namespaces: bool) -> Self {
        Printer {
            output,
            all_namespaces,
        }
    }

    fn header(&self) -> Vec<&'static str> {
        let mut h = Vec::new();
        if self.all_namespaces || self.output == Output::Wide {
            h.push("NAMESPACE");
        }
        h.extend(["LAST SEEN", "TYPE", "REASON", "OBJECT", "OCCURRENCES"]);
        if self.output == Output::Wide {
            h.extend(["COUNT", "FIRST SEEN", "SOURCE"]);
        }
        h.push("MESSAGE");
        h
    }

    fn row(&self, e: &EventHistory, now: Time) -> Vec<String> {
        let age = |t: Time| human_duration(now.nanos_since(t) / 1_000_000_000);
        let mut r = Vec::new();
        if self.all_namespaces || self.output == Output::Wide {
            r.push(sanitize::cell(&e.namespace, 63));
        }
        let object = format!("{}/{}", e.regarding.kind.to_lowercase(), e.regarding.name);
        r.extend([
            age(e.last_seen),
            sanitize::cell(&e.type_, MAX_TYPE),
            sanitize::cell(&e.reason, MAX_REASON),
            sanitize::cell(&object, MAX_OBJECT),
            e.occurrences.to_string(),
        ]);
        if self.output == Output::Wide {
            let first = e
                .first_time
                .as_deref()
                .and_then(|t| Time::parse_rfc3339(t).ok())
                .map_or_else(|| "<unknown>".to_owned(), age);
            let source = if e.reporting_instance.is_empty() {
                e.reporting_controller.clone()
            } else {
                format!("{}, {}", e.reporting_controller, e.reporting_instance)
            };
            r.extend([
                e.count.to_string(),
                first,
                sanitize::cell(&source, MAX_OBJECT),
            ]);
        }
        r.push(sanitize::cell(&e.note, MAX_MESSAGE));
        r
    }

    /// Prints `events` (after the table's header if `header`); the table's column widths
    /// (computed over them, or `fixed` ones for the lines of `--follow`) are returned.
    fn print(
        &self,
        out: &mut impl std::io::Write,
        events: &[EventHistory],
        now: Time,
        fixed: Option<&[usize]>,
        header: bool,
    ) -> anyhow::Result<Vec<usize>> {
        if self.output == Output::Json {
            for e in events {
                serde_json::to_writer(&mut *out, e)?;
                out.write_all(b"\n")?;
            }
            out.flush()?;
            return Ok(Vec::new());
        }
        let titles = self.header();
        let rows: Vec<Vec<String>> = events.iter().map(|e| self.row(e, now)).collect();
        let widths = match fixed {
            Some(w) => w.to_vec(),
            None => {
                let mut w: Vec<usize> = titles.iter().map(|h| h.len()).collect();
                for r in &rows {
                    for (w, c) in w.iter_mut().zip(r) {
                        *w = (*w).max(c.chars().count());
                    }
                }
                w
            }
        };
        let line = |cells: &[&str]| {
            let mut l = String::new();
            for (i, c) in cells.iter().enumerate() {
                l.push_str(c);
                if i + 1 < cells.len() {
                    let w = widths.get(i).copied().unwrap_or(0);
                    l.push_str(&" ".repeat(w.saturating_sub(c.chars().count()) + 3));
                }
            }
            l.trim_end().to_owned()
        };
        if header {
            writeln!(out, "{}", line(&titles))?;
        }
        for r in &rows {
            let cells: Vec<&str> = r.iter().map(String::as_str).collect();
            writeln!(out, "{}", line(&cells))?;
        }
        out.flush()?;
        Ok(widths)
    }
}

/// Completes on SIGTERM or Ctrl-C (SIGINT).
async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_as_kubectl_writes_them() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        for bad in [
            "",
            "0s",
            "h",
            "5",
            "5x",
            "-1h",
            "1.5h",
            "99999999999999999999d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_table_shows_the_occurrences_and_escapes_server_text() {
        let e = EventHistory {
            uid: "u".into(),
            namespace: "web".into(),
            name: "web-1.1".into(),
            api: None,
            regarding: kevents_export::Regarding {
                kind: "Pod".into(),
                name: "web-1".into(),
                ..Default::default()
            },
            reason: "BackOff".into(),
            type_: "Warning".into(),
            note: "bad\x1b[31m".into(),
            reporting_controller: "kubelet".into(),
            reporting_instance: "node-1".into(),
            first_time: Some("2026-12-07T09:00:00Z".into()),
            last_time: Some("2026-12-07T10:00:00Z".into()),
            count: 40,
            occurrences: 7,
            records: 3,
            last_seen: Time::parse_rfc3339("2026-12-07T10:00:00Z").unwrap(),
        };
        let now = Time::parse_rfc3339("2026-12-07T10:05:00Z").unwrap();
        let mut out = Vec::new();
        Printer::new(Output::Table, false)
            .print(&mut out, std::slice::from_ref(&e), now, None, true)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("LAST SEEN   TYPE"), "{text}");
        assert!(lines[1].starts_with("5m "), "{text}");
        assert!(
            lines[1].contains("pod/web-1") && lines[1].contains(" 7 "),
            "{text}"
        );
        assert!(!text.contains('\x1b'), "{text:?}");
        let mut out = Vec::new();
        Printer::new(Output::Wide, true)
            .print(&mut out, std::slice::from_ref(&e), now, None, true)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("kubelet, node-1") && text.contains(" 40 "),
            "{text}"
        );
        assert!(text.contains("65m"), "{text}");
    }
}
