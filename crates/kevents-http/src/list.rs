//! Paginated event lists of both APIs with bounds on everything a server controls: the
//! number of pages ([`HttpConfig::max_list_pages`](crate::HttpConfig::max_list_pages)), the
//! bytes of all answers together
//! ([`HttpConfig::max_list_bytes`](crate::HttpConfig::max_list_bytes)), and a `continue` token
//! the server already sent (a list that would never end). [`ListError`] says which.

use std::collections::HashSet;

use http::Method;
use kevents_core::SinkError;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use thiserror::Error;

use crate::client::{Body, HttpSink, status_error, unexpected};
use crate::config::LIST_PAGE_SIZE;

/// Why a list of events failed. Nothing is returned then: a list is complete or an error.
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
        /// The limit ([`HttpConfig::max_list_pages`](crate::HttpConfig::max_list_pages)).
        limit: usize,
        /// Events read.
        items: usize,
    },
    /// The answers of the list are larger, all together, than allowed.
    #[error(
        "event list: answers larger than {limit} bytes in total ({pages} pages, {items} events read); raise max_list_bytes if that much is expected"
    )]
    TooLarge {
        /// The limit ([`HttpConfig::max_list_bytes`](crate::HttpConfig::max_list_bytes)).
        limit: usize,
        /// Pages read completely.
        pages: usize,
        /// Events read.
        items: usize,
    },
}

impl ListError {
    /// The HTTP status code, if the server answered a page with an error.
    ///
    /// ```
    /// let e = kevents_http::ListError::TooManyPages { limit: 3, items: 750 };
    /// assert_eq!(e.code(), None);
    /// ```
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
#[serde(bound = "T: DeserializeOwned")]
struct List<T> {
    #[serde(default)]
    items: Vec<T>,
    metadata: Option<ListMeta>,
}

impl HttpSink {
    /// Every event of `namespace` (all for `""`) of the API at `prefix`, in pages of
    /// [`LIST_PAGE_SIZE`], within the list limits.
    pub(crate) async fn list_all<T: DeserializeOwned>(
        &self,
        prefix: &[&str],
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
            let mut url = self.events_url_at(prefix, namespace, None)?;
            url.query_pairs_mut()
                .append_pair("limit", &LIST_PAGE_SIZE.to_string());
            if !cont.is_empty() {
                url.query_pairs_mut().append_pair("continue", &cont);
            }
            // One page may use all that is left of the byte budget.
            let answer = self
                .send_capped(Method::GET, url, &Body::Empty, max_bytes - used)
                .await?;
            if !answer.status.is_success() {
                return Err(status_error(&answer).into());
            }
            if answer.oversized {
                return Err(ListError::TooLarge {
                    limit: max_bytes,
                    pages: page - 1,
                    items: out.len(),
                });
            }
            used += answer.body.len();
            let list: List<T> = serde_json::from_slice(&answer.body)
                .map_err(|e| unexpected(format_args!("not an event list: {e}")))?;
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
