//! Paginated event lists of both APIs with bounds on everything a server controls: the
//! number of pages ([`Limits::max_list_pages`]), the bytes of all answers together
//! ([`Limits::max_list_bytes`]), and a `continue` token the server already sent (a list
//! that would never end). [`ListError`] says which.

use std::collections::HashSet;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use thiserror::Error;

use crate::answer::unexpected_object;
use crate::core_v1::Event;
use crate::status::SinkError;

use super::client::{CORE_V1_PATH, Client, encode_segment, events_path};
use super::transport::{LIST_PAGE_SIZE, Limits, Method, Response, Transport};

/// Why a list of events failed. Nothing is returned then: a list is complete or an error.
///
/// ```
/// let e = kevents_core::request::ListError::TooManyPages { limit: 3, items: 750 };
/// assert_eq!(e.code(), None);
/// ```
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ListError {
    /// A page request failed, or its answer was not an event list.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// The server sent a `continue` token it had sent before: following it would read the
    /// same pages again, forever.
    #[error(
        "event list: the server repeated a continue token after {pages} pages ({items} events): the list would never end"
    )]
    RepeatedContinue {
        /// Pages read, the last one included.
        pages: usize,
        /// Events read.
        items: usize,
    },
    /// The list has more pages than allowed.
    #[error(
        "event list: more than {limit} pages ({items} events read); raise max_list_pages if that many are expected"
    )]
    TooManyPages {
        /// The limit ([`Limits::max_list_pages`]).
        limit: usize,
        /// Events read.
        items: usize,
    },
    /// The answers of the list are larger, all together, than allowed.
    #[error(
        "event list: answers larger than {limit} bytes in total ({pages} pages, {items} events read); raise max_list_bytes if that much is expected"
    )]
    TooLarge {
        /// The limit ([`Limits::max_list_bytes`]).
        limit: usize,
        /// Pages read completely.
        pages: usize,
        /// Events read.
        items: usize,
    },
}

impl ListError {
    /// The HTTP status code, if the server answered a page with an error.
    pub fn code(&self) -> Option<u16> {
        match self {
            ListError::Sink(e) => e.code(),
            _ => None,
        }
    }

    /// Whether the server answered 404 (no such namespace or API).
    pub fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }
}

#[derive(Deserialize)]
struct ListMeta {
    #[serde(default, rename = "continue")]
    cont: String,
}

#[derive(Deserialize)]
#[serde(bound = "E: DeserializeOwned")]
struct List<E> {
    #[serde(default)]
    items: Vec<E>,
    metadata: Option<ListMeta>,
}

impl<T: Transport> Client<T> {
    /// Every core/v1 event of `namespace` (all namespaces for `""`), read in pages of
    /// [`LIST_PAGE_SIZE`], within the list limits ([`Limits::max_list_pages`] and
    /// [`Limits::max_list_bytes`]); a server that repeats a `continue` token is an error
    /// ([`ListError::RepeatedContinue`]), not an endless loop.
    pub async fn list_events(&self, namespace: &str) -> Result<Vec<Event>, ListError> {
        self.list_all(CORE_V1_PATH, namespace).await
    }

    /// The first page of core/v1 events of `namespace` (all namespaces for `""`): at most
    /// `limit` events (1 to [`LIST_PAGE_SIZE`]; 0 reads one, more reads [`LIST_PAGE_SIZE`]),
    /// its answer read up to [`Limits::max_list_bytes`]. One request, whatever the size of
    /// the namespace: enough to check that events can be listed, without reading them all.
    ///
    /// ```no_run
    /// # async fn f<T: kevents_core::request::Transport>(requests: kevents_core::request::Client<T>)
    /// # -> Result<(), kevents_core::request::ListError> {
    /// let first = requests.list_events_page("default", 1).await?; // GET ...?limit=1
    /// assert!(first.len() <= 1);
    /// # Ok(()) }
    /// ```
    pub async fn list_events_page(
        &self,
        namespace: &str,
        limit: usize,
    ) -> Result<Vec<Event>, ListError> {
        let max_bytes = self.transport().limits().max_list_bytes;
        let base = events_path(CORE_V1_PATH, namespace, None)?;
        let limit = limit.clamp(1, LIST_PAGE_SIZE);
        let answer = self
            .send(
                Method::Get,
                format!("{base}?limit={limit}"),
                None,
                Vec::new(),
                max_bytes,
            )
            .await?;
        let list: List<Event> = list_page(&answer, max_bytes, 0, 0)?;
        let mut items = list.items;
        // A server that ignores `limit` still yields at most what was asked for.
        items.truncate(limit);
        Ok(items)
    }

    /// Every event of `namespace` (all for `""`) of the API at `prefix`, in pages of
    /// [`LIST_PAGE_SIZE`], within the list limits.
    pub(super) async fn list_all<E: DeserializeOwned>(
        &self,
        prefix: &str,
        namespace: &str,
    ) -> Result<Vec<E>, ListError> {
        let Limits {
            max_list_pages: max_pages,
            max_list_bytes: max_bytes,
            ..
        } = self.transport().limits();
        let base = events_path(prefix, namespace, None)?;
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut cont = String::new();
        let mut used = 0usize;
        let mut page = 0usize;
        loop {
            page += 1;
            if page > max_pages {
                return Err(ListError::TooManyPages {
                    limit: max_pages,
                    items: out.len(),
                });
            }
            let mut path = format!("{base}?limit={LIST_PAGE_SIZE}");
            if !cont.is_empty() {
                path.push_str("&continue=");
                path.push_str(&encode_segment(&cont));
            }
            // One page may use all that is left of the byte budget.
            let answer = self
                .send(Method::Get, path, None, Vec::new(), max_bytes - used)
                .await?;
            let list: List<E> = list_page(&answer, max_bytes, page - 1, out.len())?;
            used += answer.body.len();
            out.extend(list.items);
            cont = list.metadata.map(|m| m.cont).unwrap_or_default();
            if cont.is_empty() {
                return Ok(out);
            }
            if !seen.insert(cont.clone()) {
                return Err(ListError::RepeatedContinue {
                    pages: page,
                    items: out.len(),
                });
            }
        }
    }
}

/// One page of a list, decoded: an error answer, a page over the byte budget (`max_bytes`,
/// after `pages` pages and `items` items) or a body that is no list is an error.
fn list_page<E: DeserializeOwned>(
    answer: &Response,
    max_bytes: usize,
    pages: usize,
    items: usize,
) -> Result<List<E>, ListError> {
    if !answer.answer().is_success() {
        return Err(answer.answer().status_error().into());
    }
    if answer.oversized {
        return Err(ListError::TooLarge {
            limit: max_bytes,
            pages,
            items,
        });
    }
    serde_json::from_slice(&answer.body)
        .map_err(|e| unexpected_object(format_args!("not an event list: {e}")).into())
}
