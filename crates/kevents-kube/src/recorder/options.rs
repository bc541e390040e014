//! How the drop-in recorder builds, counts and writes events.

use std::time::Duration;

use kevents_actors::{IntakePolicy, RetryPolicy, WatcherPolicy};

/// What happens to the note of a repeated event.
///
/// kube-rs's recorder keeps the note of the **first** occurrence of a series (its PATCH sends
/// the cached first event back with a new count). client-go's `tools/events` does the same.
///
/// ```
/// use kevents_kube::Notes;
/// assert_eq!(Notes::default(), Notes::First);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Notes {
    /// The note is not part of an event's identity: occurrences that differ only in their
    /// note are one series, and the stored event keeps the first note (as kube-rs and
    /// client-go). The default.
    #[default]
    First,
    /// The note is part of the identity: a different note starts a new event (its own
    /// series), so every distinct note is stored, each with its exact count.
    Distinct,
}

/// What happens to a note over the apiserver's 1024-byte limit.
///
/// ```
/// use kevents_kube::NoteLength;
/// assert_eq!(NoteLength::default(), NoteLength::Truncate);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NoteLength {
    /// Cut on a UTF-8 boundary so that note and `...` fit (the default; kube-rs sends it as
    /// it is and the apiserver answers 422).
    #[default]
    Truncate,
    /// Refuse the call with [`PublishError::Invalid`](crate::PublishError::Invalid).
    Reject,
}

/// Options of a [`Recorder`](crate::Recorder) ([`Recorder::with_options`]).
///
/// ```
/// use kevents_kube::{Notes, RecorderOptions};
/// let o = RecorderOptions::default().notes(Notes::Distinct);
/// assert!(!o.keep_resource_version);
/// ```
///
/// [`Recorder::with_options`]: crate::Recorder::with_options
#[derive(Debug, Clone)]
pub struct RecorderOptions {
    /// What happens to the note of a repeated event ([`Notes::First`]).
    pub notes: Notes,
    /// What happens to a note over 1024 bytes ([`NoteLength::Truncate`]).
    pub note_length: NoteLength,
    /// Keep the `resourceVersion` of the regarding and related references (default `false`:
    /// it is removed, so repeats on an object that changes between reconciles form one
    /// series; kube-rs starts a new event for every resourceVersion).
    pub keep_resource_version: bool,
    /// The intake (default: bounded, 4096 occurrences). [`Recorder::publish`] waits for room
    /// when it is full (never drops); [`Recorder::try_publish`] drops and counts.
    ///
    /// [`Recorder::publish`]: crate::Recorder::publish
    /// [`Recorder::try_publish`]: crate::Recorder::try_publish
    pub intake: IntakePolicy,
    /// How occurrences reach the series chain (default: backpressure, 4096: none is
    /// dropped between the intake and the series cache).
    pub delivery: WatcherPolicy,
    /// Retries of writes (kevents' default: 12 attempts, 429/5xx and transport errors).
    pub retry: RetryPolicy,
    /// Writes in flight at once across different events (default 16).
    pub max_in_flight: usize,
    /// Events tracked for series at once (default 16 384; the least recently seen is finished
    /// early, with its count written, when full).
    pub max_series: usize,
    /// Whether `events.k8s.io/v1` is served (default `true`, as kube-rs assumes: Kubernetes
    /// 1.19+). When `false`, events are written as core/v1 events through client-go's
    /// correlator instead.
    pub events_v1_served: bool,
    /// Deadline of the shutdown when the last handle is dropped without
    /// [`Recorder::shutdown`](crate::Recorder::shutdown) (default 5 s).
    pub drop_deadline: Duration,
}

impl Default for RecorderOptions {
    fn default() -> Self {
        RecorderOptions {
            notes: Notes::First,
            note_length: NoteLength::Truncate,
            keep_resource_version: false,
            intake: IntakePolicy::DropIfFull { capacity: 4096 },
            delivery: WatcherPolicy::Backpressure { capacity: 4096 },
            retry: RetryPolicy::default(),
            max_in_flight: 16,
            max_series: 16_384,
            events_v1_served: true,
            drop_deadline: Duration::from_secs(5),
        }
    }
}

impl RecorderOptions {
    /// Sets [`RecorderOptions::notes`].
    ///
    /// ```
    /// let o = kevents_kube::RecorderOptions::default().notes(kevents_kube::Notes::Distinct);
    /// assert_eq!(o.notes, kevents_kube::Notes::Distinct);
    /// ```
    pub fn notes(mut self, notes: Notes) -> Self {
        self.notes = notes;
        self
    }

    /// Sets [`RecorderOptions::note_length`].
    ///
    /// ```
    /// let o = kevents_kube::RecorderOptions::default().note_length(kevents_kube::NoteLength::Reject);
    /// assert_eq!(o.note_length, kevents_kube::NoteLength::Reject);
    /// ```
    pub fn note_length(mut self, note_length: NoteLength) -> Self {
        self.note_length = note_length;
        self
    }

    /// Sets [`RecorderOptions::keep_resource_version`].
    ///
    /// ```
    /// let o = kevents_kube::RecorderOptions::default().keep_resource_version(true);
    /// assert_eq!(o.keep_resource_version, true);
    /// ```
    pub fn keep_resource_version(mut self, keep: bool) -> Self {
        self.keep_resource_version = keep;
        self
    }

    /// Sets [`RecorderOptions::events_v1_served`].
    ///
    /// ```
    /// let o = kevents_kube::RecorderOptions::default().events_v1_served(false);
    /// assert_eq!(o.events_v1_served, false);
    /// ```
    pub fn events_v1_served(mut self, served: bool) -> Self {
        self.events_v1_served = served;
        self
    }
}
