//! Paginated event lists of both APIs over the kube client, bounded like kevents-http's:
//! pages, bytes of all answers together, and a `continue` token the server already sent.

use std::collections::HashSet;

use http::Method;
use kevents_core::SinkError;
use kevents_core::answer::unexpected_object;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use thiserror::Error;

use crate::sink::{Body, KubeSink, LIST_PAGE_SIZE, query_value};

/// Why a list of events failed. Nothing is returned then: a list is complete or an error.
///
/// ```
/// let e = kevents_kube::ListError::TooManyPages { limit: 3, items: 750 };
/// assert_eq!(e.code(), None);
/// ```
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ListError {
    /// A page request failed, or its answer was not an event list.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// The server sent a `continue` token it had sent before.
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
    #[error("event list: more than {limit} pages ({items} events read)")]
    TooManyPages {
        /// The limit.
        limit: usize,
        /// Events read.
        items: usize,
    },
    /// The answers of the list are larger, all together, than allowed.
    #[error(
        "event list: answers larger than {limit} bytes in total ({pages} pages, {items} events read)"
    )]
    TooLarge {
        /// The limit.
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
}

#[derive(Deserialize)]
struct ListMeta {
    #[serde(default, rename = "continue")]
    cont: String,
}

#[derive(Deserialize)]
#[serde(bound = "T: DeserializeOwned")]
struct List<T> {
    #[serde(default)]
    items: Vec<T>,
    metadata: Option<ListMeta>,
}

impl KubeSink {
    /// Every event of `namespace` (all for `""`) of the API at `prefix`, in pages of
    /// [`LIST_PAGE_SIZE`], within the list limits.
    pub(crate) async fn list_all<T: DeserializeOwned>(
        &self,
        prefix: &'static str,
        namespace: &str,
    ) -> Result<Vec<T>, ListError> {
        let max_pages = self.inner.max_list_pages;
        let max_bytes = self.inner.max_list_bytes;
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
            let mut path = Self::events_path(prefix, namespace, None);
            path.push_str(&format!("?limit={LIST_PAGE_SIZE}"));
            if !cont.is_empty() {
                path.push_str("&continue=");
                path.push_str(&query_value(&cont));
            }
            let read = self
                .send_capped(Method::GET, &path, Body::Empty, max_bytes - used)
                .await?;
            if !read.view().is_success() {
                return Err(read.view().status_error().into());
            }
            if read.oversized {
                return Err(ListError::TooLarge {
                    limit: max_bytes,
                    pages: page - 1,
                    items: out.len(),
                });
            }
            used += read.body.len();
            let list: List<T> = serde_json::from_slice(&read.body)
                .map_err(|e| unexpected_object(format_args!("not an event list: {e}")))?;
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
