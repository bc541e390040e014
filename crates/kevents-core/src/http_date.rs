//! HTTP dates (RFC 9110, section 5.6.7), as a `Retry-After` header may carry one: the
//! preferred IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) and the two obsolete forms a
//! recipient must still accept, RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and C's asctime
//! (`Sun Nov  6 08:49:37 1994`). Pure: no clock, no allocation.

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const LONG_DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// An HTTP date as Unix seconds; `None` for anything that is not one of the three forms (or
/// names a day that does not exist). The day of the week is checked for its spelling only,
/// as most implementations do.
///
/// ```
/// use kevents_core::http_date::parse_http_date;
/// assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), Some(784111777));
/// assert_eq!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), Some(784111777));
/// assert_eq!(parse_http_date("Sun Nov  6 08:49:37 1994"), Some(784111777));
/// assert_eq!(parse_http_date("Sun, 31 Feb 1994 08:49:37 GMT"), None);
/// assert_eq!(parse_http_date("120"), None);
/// ```
pub fn parse_http_date(value: &str) -> Option<i64> {
    let v = value.trim();
    imf_fixdate(v).or_else(|| rfc850(v)).or_else(|| asctime(v))
}

/// `Sun, 06 Nov 1994 08:49:37 GMT`.
fn imf_fixdate(v: &str) -> Option<i64> {
    let (day_name, rest) = v.split_once(", ")?;
    DAYS.contains(&day_name).then_some(())?;
    let mut parts = rest.split(' ');
    let day = digits(parts.next()?, 2)?;
    let month = month(parts.next()?)?;
    let year = digits(parts.next()?, 4)?;
    let secs = clock(parts.next()?)?;
    (parts.next()? == "GMT" && parts.next().is_none()).then_some(())?;
    to_unix(year, month, day, secs)
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`: a two-digit year more than 50 years in the future is in
/// the past century (RFC 9110); the century is taken as 19xx for 50-99, 20xx otherwise.
fn rfc850(v: &str) -> Option<i64> {
    let (day_name, rest) = v.split_once(", ")?;
    LONG_DAYS.contains(&day_name).then_some(())?;
    let mut parts = rest.split(' ');
    let mut date = parts.next()?.split('-');
    let day = digits(date.next()?, 2)?;
    let month = month(date.next()?)?;
    let yy = digits(date.next()?, 2)?;
    date.next().is_none().then_some(())?;
    let year = if yy >= 50 { 1900 + yy } else { 2000 + yy };
    let secs = clock(parts.next()?)?;
    (parts.next()? == "GMT" && parts.next().is_none()).then_some(())?;
    to_unix(year, month, day, secs)
}

/// `Sun Nov  6 08:49:37 1994` (a one-digit day is padded with a space).
fn asctime(v: &str) -> Option<i64> {
    let day_name = v.get(..3)?;
    DAYS.contains(&day_name).then_some(())?;
    let rest = v.get(3..)?.strip_prefix(' ')?;
    let month = month(rest.get(..3)?)?;
    let rest = rest.get(3..)?.strip_prefix(' ')?;
    let (day, rest) = match rest.strip_prefix(' ') {
        Some(r) => (digits(r.get(..1)?, 1)?, r.get(1..)?),
        None => (digits(rest.get(..2)?, 2)?, rest.get(2..)?),
    };
    let mut parts = rest.strip_prefix(' ')?.split(' ');
    let secs = clock(parts.next()?)?;
    let year = digits(parts.next()?, 4)?;
    parts.next().is_none().then_some(())?;
    to_unix(year, month, day, secs)
}

/// Exactly `n` ASCII digits.
fn digits(s: &str, n: usize) -> Option<i64> {
    (s.len() == n && s.bytes().all(|b| b.is_ascii_digit())).then(|| {
        s.bytes()
            .fold(0i64, |acc, b| acc * 10 + i64::from(b - b'0'))
    })
}

fn month(s: &str) -> Option<i64> {
    MONTHS.iter().position(|m| *m == s).map(|i| i as i64 + 1)
}

/// `HH:MM:SS` as seconds of the day (a leap second, `:60`, is accepted as RFC 9110 allows).
fn clock(s: &str) -> Option<i64> {
    let mut p = s.split(':');
    let h = digits(p.next()?, 2)?;
    let m = digits(p.next()?, 2)?;
    let sec = digits(p.next()?, 2)?;
    (p.next().is_none() && h < 24 && m < 60 && sec <= 60).then_some(h * 3600 + m * 60 + sec)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// Unix seconds of a civil date and time of day (UTC); `None` for a day the month does not
/// have.
fn to_unix(year: i64, month: i64, day: i64, secs_of_day: i64) -> Option<i64> {
    let len = match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    (1..=len).contains(&day).then_some(())?;
    // Days from 1970-01-01 (Howard Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + secs_of_day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_forms_and_their_edges() {
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            parse_http_date("Tue, 29 Feb 2028 23:59:59 GMT"),
            Some(1_835_481_599)
        );
        assert_eq!(parse_http_date("Thu, 29 Feb 2029 00:00:00 GMT"), None);
        assert_eq!(
            parse_http_date("Wednesday, 01-Jan-25 00:00:00 GMT"),
            Some(1_735_689_600)
        );
        assert_eq!(
            parse_http_date("Thu Jan  1 00:00:00 1970"),
            Some(0),
            "asctime, one-digit day"
        );
        assert_eq!(
            parse_http_date("Wed Jan 01 00:00:00 2025"),
            Some(1_735_689_600)
        );
        for bad in [
            "",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 06 nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT extra",
            "Xyz, 06 Nov 1994 08:49:37 GMT",
            "2026-11-26T10:00:00Z",
            "Sun Nov  6 08:49:37 94",
        ] {
            assert_eq!(parse_http_date(bad), None, "{bad}");
        }
    }
}
