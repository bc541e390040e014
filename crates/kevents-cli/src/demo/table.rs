//! The `kubectl get events`-style table and kubectl's human durations.

use kevents_core::{Event, Time};

use crate::sanitize;

/// kubectl's `HumanDuration` (k8s.io/apimachinery/pkg/util/duration), for ages.
///
/// ```text
/// 45s, 119s, 2m5s, 9m59s, 10m, 2h59m, 3h4m, 7h59m, 8h, 2d, 8d, 2y...
/// ```
pub fn human_duration(secs: i64) -> String {
    let s = secs.max(0);
    if s < 120 {
        return format!("{s}s");
    }
    let m = s / 60;
    if m < 10 {
        let rem = s % 60;
        return if rem == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{rem}s")
        };
    }
    if m < 180 {
        return format!("{m}m");
    }
    let h = m / 60;
    if h < 8 {
        let rem = m % 60;
        return if rem == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{rem}m")
        };
    }
    if h < 48 {
        return format!("{h}h");
    }
    let d = h / 24;
    if d < 365 * 2 {
        return format!("{d}d");
    }
    format!("{}y", d / 365)
}

/// `(x5 over 29m)` for a repeated event, empty for a single one (as `kubectl describe`).
pub fn repeat_note(e: &Event) -> String {
    match (e.first_timestamp, e.last_timestamp) {
        (Some(first), Some(last)) if e.count > 1 => format!(
            "(x{} over {})",
            e.count,
            human_duration(last.nanos_since(first) / 1_000_000_000)
        ),
        _ if e.count > 1 => format!("(x{})", e.count),
        _ => String::new(),
    }
}

fn last_seen(e: &Event) -> Option<Time> {
    e.last_timestamp.or(e.event_time).or(e.first_timestamp)
}

/// Longest TYPE cell shown (characters).
pub const MAX_TYPE: usize = 16;
/// Longest REASON cell shown (characters).
pub const MAX_REASON: usize = 48;
/// Longest OBJECT cell shown (characters).
pub const MAX_OBJECT: usize = 80;

/// Renders `events` as `kubectl get events` does (oldest first, by last timestamp), with a
/// COUNT column in `kubectl describe`'s `(xN over M)` form. Every string from the server is
/// escaped ([`sanitize::escape`]: no control character, escape sequence or line break
/// reaches the terminal) and cut with `…` when longer than its column's limit (`max_message`
/// characters for MESSAGE).
pub fn render(events: &[Event], now: Time, max_message: usize) -> String {
    let mut sorted: Vec<&Event> = events.iter().collect();
    sorted.sort_by_key(|e| (last_seen(e), e.metadata.name.clone()));
    let header = ["LAST SEEN", "TYPE", "REASON", "OBJECT", "COUNT", "MESSAGE"];
    let rows: Vec<[String; 6]> = sorted
        .iter()
        .map(|e| {
            let age = last_seen(e)
                .map(|t| human_duration(now.nanos_since(t) / 1_000_000_000))
                .unwrap_or_else(|| "<unknown>".into());
            let object = format!(
                "{}/{}",
                e.involved_object.kind.to_lowercase(),
                e.involved_object.name
            );
            let count = match repeat_note(e) {
                note if note.is_empty() => e.count.max(1).to_string(),
                note => note,
            };
            [
                age,
                sanitize::cell(&e.type_, MAX_TYPE),
                sanitize::cell(&e.reason, MAX_REASON),
                sanitize::cell(&object, MAX_OBJECT),
                count,
                sanitize::cell(&e.message, max_message),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r.iter()) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: [&str; 6]| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                l.push_str(c);
            } else {
                l.push_str(c);
                l.push_str(&" ".repeat(widths[i] - c.chars().count() + 3));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(header);
    for r in &rows {
        line([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5]]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_kubectl() {
        let cases = [
            (0, "0s"),
            (45, "45s"),
            (119, "119s"),
            (125, "2m5s"),
            (180, "3m"),
            (600, "10m"),
            (1790, "29m"),
            (3 * 3600 + 240, "3h4m"),
            (9 * 3600, "9h"),
            (3 * 86400, "3d"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(secs), want, "{secs}");
        }
    }

    #[test]
    fn table_has_kubectl_columns_and_repeat_notes() {
        let mut e = Event::default();
        e.metadata.name = "web.1".into();
        e.involved_object.kind = "Pod".into();
        e.involved_object.name = "web".into();
        e.type_ = "Warning".into();
        e.reason = "BackOff".into();
        e.message = "Back-off restarting failed container".into();
        e.count = 5;
        e.first_timestamp = Some(Time::from_unix_secs(1_000));
        e.last_timestamp = Some(Time::from_unix_secs(1_000 + 29 * 60));
        let t = render(&[e], Time::from_unix_secs(1_000 + 30 * 60), 20);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("LAST SEEN   TYPE      REASON    OBJECT    COUNT"));
        assert!(lines[1].starts_with("60s         Warning   BackOff   pod/web   (x5 over 29m)"));
        assert!(lines[1].ends_with("Back-off restarting…"));
    }

    #[test]
    fn server_strings_cannot_forge_rows_or_reach_the_terminal() {
        let mut e = Event::default();
        e.metadata.name = "x.1".into();
        e.involved_object.kind = "Pod\x1b]0;owned\x07".into();
        e.involved_object.name = "n".repeat(500);
        e.type_ = "Normal\u{9b}2J".into();
        e.reason = "BackOff\r\n60s   Normal   Forged   pod/x   1   all good".into();
        e.message = "\x1b[2J\x1b[Hcleared\nanother forged row\u{202e}".into();
        e.count = 1;
        e.last_timestamp = Some(Time::from_unix_secs(1_000));
        let t = render(&[e], Time::from_unix_secs(1_060), 40);
        assert_eq!(t.lines().count(), 2, "{t}");
        assert!(
            !t.chars()
                .any(|c| c != '\n' && (c.is_control() || c == '\u{202e}')),
            "{t:?}"
        );
        let row = t.lines().nth(1).unwrap_or_default();
        assert!(row.contains("BackOff\\r\\n60s"), "{row}");
        assert!(row.contains("pod\\u{1b}]0;owned\\u{7}/nnn"), "{row}");
        assert!(row.contains(&format!("{}…", "n".repeat(10))), "{row}");
        assert!(row.ends_with('…'), "{row}");
        assert!(row.contains("\\u{1b}[2J\\u{1b}[Hcleared\\n"), "{row}");
    }
}
