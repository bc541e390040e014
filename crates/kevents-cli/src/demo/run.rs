//! The identifier of one demo run, so that runs into the same namespace never collide and
//! the read-back shows this run's events only. It is the sub-millisecond part of every
//! timestamp of the story (1 to 999 999 nanoseconds past a whole millisecond): the story's
//! steps are whole milliseconds apart, every event's name is `<object>.<unix nanos hex>`
//! (client-go's), so every name of a run carries its identifier and two runs with different
//! identifiers cannot produce the same name, however close in time they start. A run picks
//! an identifier no event of the namespace has yet.

use std::collections::HashSet;
use std::hash::{BuildHasher as _, Hasher as _};

use kevents_core::Time;

/// Identifiers are `1..=MAX_ID`.
const MAX_ID: u32 = 999_999;

/// The run identifier an event name carries (`None` for a name not of the form
/// `<object>.<unix nanos hex>`, or on a whole millisecond: no run's).
pub fn run_id_of(name: &str) -> Option<u32> {
    let (_, hex) = name.rsplit_once('.')?;
    let nanos = i64::from_str_radix(hex, 16).ok()?;
    let id = u32::try_from(nanos.rem_euclid(1_000_000)).ok()?;
    (id != 0).then_some(id)
}

/// A random identifier not in `used` (there are 999 999; a namespace holding them all gets a
/// reused one, which is then the only way two runs can collide).
pub fn choose_run_id(used: &HashSet<u32>) -> u32 {
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let first = (random % u64::from(MAX_ID)) as u32 + 1;
    let mut id = first;
    while used.contains(&id) {
        id = id % MAX_ID + 1;
        if id == first {
            break;
        }
    }
    id
}

/// The story's start: `unix_secs` plus the run identifier in nanoseconds.
pub fn story_start(unix_secs: i64, id: u32) -> Time {
    Time::from_unix_nanos(unix_secs * 1_000_000_000 + i64::from(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kevents_core::name::event_name;

    #[test]
    fn every_name_of_a_run_carries_its_identifier() {
        let start = story_start(1_764_150_000, 4242);
        for offset_ms in [0i64, 1, 999, 1_800_000, 1_800_003] {
            let t = Time::from_unix_nanos(start.unix_nanos() + offset_ms * 1_000_000);
            assert_eq!(run_id_of(&event_name("web-7d4c9b6f5-x2x7q", t)), Some(4242));
        }
        assert_eq!(run_id_of("forged.1"), Some(1));
        assert_eq!(run_id_of("x.3b9aca00"), None, "a whole second is no run's");
        assert_eq!(run_id_of("no-dot"), None);
        assert_eq!(run_id_of("x.zz"), None);
    }

    #[test]
    fn a_chosen_identifier_is_unused() {
        let used: HashSet<u32> = (1..=MAX_ID).filter(|i| *i != 777).collect();
        assert_eq!(choose_run_id(&used), 777);
        let id = choose_run_id(&HashSet::new());
        assert!((1..=MAX_ID).contains(&id));
    }
}
