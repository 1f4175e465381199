//! `session/list` pagination: a listing that needs more than one page is frozen into a snapshot
//! (the ordered session ids at the time of the first call), and each cursor names a snapshot
//! and an offset into it. So paging is stable while sessions are used, created or deleted
//! meanwhile: every session of the snapshot that still exists appears exactly once, and every
//! page but the last is full.
//!
//! Cursors are opaque to clients: the text `v1:<snapshot>:<offset>` in lower-case hex. A cursor
//! that does not decode, names a snapshot that expired or belongs to another `cwd` filter, or
//! points past the end is refused (the caller answers `-32602`); there is no silent fallback to
//! the first page.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

/// Most snapshots kept at once; older ones expire first.
pub const MAX_SNAPSHOTS: usize = 64;

/// How long a snapshot stays usable after the listing's first call.
pub const SNAPSHOT_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// Why a cursor cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    /// The text is not a cursor this agent issued.
    #[error("invalid cursor {0:?}: not a cursor issued by this agent")]
    Malformed(String),
    /// The snapshot it names is gone (expired, evicted, or from an earlier run).
    #[error(
        "stale cursor {0:?}: the listing it belongs to has expired; list again without a cursor"
    )]
    Expired(String),
    /// The cursor was issued for a different `cwd` filter.
    #[error("invalid cursor {0:?}: it belongs to a listing with a different cwd filter")]
    OtherFilter(String),
    /// The offset lies beyond the listing.
    #[error("invalid cursor {0:?}: it points past the end of the listing")]
    PastEnd(String),
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The session ids of this page, in order.
    pub ids: Vec<String>,
    /// The cursor of the next page, or `None` on the last page.
    pub next_cursor: Option<String>,
}

#[derive(Debug)]
struct Snapshot {
    id: u64,
    cwd: Option<String>,
    ids: Vec<String>,
    created: SystemTime,
}

/// The live snapshots of one agent.
#[derive(Debug, Default)]
pub struct Listings {
    next_id: u64,
    snapshots: VecDeque<Snapshot>,
}

impl Listings {
    /// The first page of a listing of `ordered` (already filtered by `cwd` and sorted).
    pub fn first_page(
        &mut self,
        ordered: Vec<String>,
        cwd: Option<&str>,
        page_size: usize,
        now: SystemTime,
    ) -> Page {
        self.expire(now);
        let page_size = page_size.max(1);
        if ordered.len() <= page_size {
            return Page {
                ids: ordered,
                next_cursor: None,
            };
        }
        self.next_id += 1;
        let id = self.next_id;
        let ids = ordered[..page_size].to_vec();
        let next_cursor = Some(encode_cursor(id, page_size));
        self.snapshots.push_back(Snapshot {
            id,
            cwd: cwd.map(str::to_owned),
            ids: ordered,
            created: now,
        });
        while self.snapshots.len() > MAX_SNAPSHOTS {
            self.snapshots.pop_front();
        }
        Page { ids, next_cursor }
    }

    /// The page a cursor points at. `exists` tells which sessions of the snapshot still exist;
    /// the others are skipped.
    pub fn page_at(
        &mut self,
        cursor: &str,
        cwd: Option<&str>,
        page_size: usize,
        now: SystemTime,
        exists: impl Fn(&str) -> bool,
    ) -> Result<Page, CursorError> {
        self.expire(now);
        let page_size = page_size.max(1);
        let (snapshot_id, offset) =
            decode_cursor(cursor).ok_or_else(|| CursorError::Malformed(cursor.to_owned()))?;
        let snapshot = self
            .snapshots
            .iter()
            .find(|snapshot| snapshot.id == snapshot_id)
            .ok_or_else(|| CursorError::Expired(cursor.to_owned()))?;
        if snapshot.cwd.as_deref() != cwd {
            return Err(CursorError::OtherFilter(cursor.to_owned()));
        }
        if offset >= snapshot.ids.len() {
            return Err(CursorError::PastEnd(cursor.to_owned()));
        }
        let mut ids = Vec::with_capacity(page_size);
        let mut index = offset;
        while index < snapshot.ids.len() && ids.len() < page_size {
            if exists(&snapshot.ids[index]) {
                ids.push(snapshot.ids[index].clone());
            }
            index += 1;
        }
        let more = snapshot.ids[index..].iter().any(|id| exists(id));
        let next_cursor = more.then(|| encode_cursor(snapshot_id, index));
        Ok(Page { ids, next_cursor })
    }

    /// Drops every snapshot (after a logout, nothing listed before remains).
    pub fn clear(&mut self) {
        self.snapshots.clear();
    }

    /// How many snapshots are live.
    pub fn len(&self) -> usize {
        self.snapshots.len()
    }

    /// Whether no snapshot is live.
    pub fn is_empty(&self) -> bool {
        self.snapshots.is_empty()
    }

    fn expire(&mut self, now: SystemTime) {
        self.snapshots.retain(|snapshot| {
            now.duration_since(snapshot.created)
                .map(|age| age < SNAPSHOT_LIFETIME)
                .unwrap_or(true)
        });
    }
}

/// Encodes a cursor.
pub fn encode_cursor(snapshot: u64, offset: usize) -> String {
    let text = format!("v1:{snapshot}:{offset}");
    text.bytes().map(|byte| format!("{byte:02x}")).collect()
}

/// Decodes a cursor into its snapshot and offset.
pub fn decode_cursor(cursor: &str) -> Option<(u64, usize)> {
    if !cursor.len().is_multiple_of(2) || cursor.len() > 128 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..cursor.len())
        .step_by(2)
        .map(|i| {
            cursor
                .get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
        })
        .collect();
    let text = String::from_utf8(bytes?).ok()?;
    let mut parts = text.split(':');
    if parts.next()? != "v1" {
        return None;
    }
    let snapshot = parts.next()?.parse().ok()?;
    let offset = parts.next()?.parse().ok()?;
    if parts.next().is_some() {
        return None;
    }
    Some((snapshot, offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("s{i}")).collect()
    }

    #[test]
    fn cursors_round_trip_and_reject_noise() {
        let cursor = encode_cursor(7, 50);
        assert_eq!(decode_cursor(&cursor), Some((7, 50)));
        for bad in [
            "",
            "zz",
            "abc",
            "76313a373a",
            "v1:1:2",
            &encode_cursor(1, 2)[2..],
        ] {
            assert_eq!(decode_cursor(bad), None, "{bad}");
        }
    }

    #[test]
    fn pages_cover_every_session_once_with_full_pages_but_the_last() {
        let now = SystemTime::UNIX_EPOCH;
        let mut listings = Listings::default();
        let all = ids(7);
        let mut page = listings.first_page(all.clone(), None, 3, now);
        let mut seen = page.ids.clone();
        assert_eq!(page.ids.len(), 3);
        let mut pages = 1;
        while let Some(cursor) = page.next_cursor.clone() {
            page = listings.page_at(&cursor, None, 3, now, |_| true).unwrap();
            pages += 1;
            if page.next_cursor.is_some() {
                assert_eq!(page.ids.len(), 3);
            }
            seen.extend(page.ids.clone());
        }
        assert_eq!(pages, 3);
        assert_eq!(seen, all);
    }

    #[test]
    fn a_single_page_has_no_cursor_and_keeps_no_snapshot() {
        let mut listings = Listings::default();
        let page = listings.first_page(ids(3), None, 3, SystemTime::UNIX_EPOCH);
        assert_eq!(page.next_cursor, None);
        assert!(listings.is_empty());
    }

    #[test]
    fn deleted_sessions_are_skipped_and_pages_stay_full() {
        let now = SystemTime::UNIX_EPOCH;
        let mut listings = Listings::default();
        let page = listings.first_page(ids(7), None, 2, now);
        let cursor = page.next_cursor.unwrap();
        let gone = ["s2", "s4"];
        let page = listings
            .page_at(&cursor, None, 2, now, |id| !gone.contains(&id))
            .unwrap();
        assert_eq!(page.ids, ["s3", "s5"]);
        let page = listings
            .page_at(&page.next_cursor.unwrap(), None, 2, now, |id| {
                !gone.contains(&id)
            })
            .unwrap();
        assert_eq!(page.ids, ["s6"]);
        assert_eq!(page.next_cursor, None);
    }

    #[test]
    fn bad_cursors_are_refused_with_a_reason() {
        let now = SystemTime::UNIX_EPOCH;
        let mut listings = Listings::default();
        let page = listings.first_page(ids(5), Some("/w"), 2, now);
        let cursor = page.next_cursor.unwrap();
        let (snapshot, _) = decode_cursor(&cursor).unwrap();
        let all = |_: &str| true;
        assert!(matches!(
            listings.page_at("garbage", Some("/w"), 2, now, all),
            Err(CursorError::Malformed(_))
        ));
        assert!(matches!(
            listings.page_at(&cursor, None, 2, now, all),
            Err(CursorError::OtherFilter(_))
        ));
        assert!(matches!(
            listings.page_at(&encode_cursor(snapshot, 5), Some("/w"), 2, now, all),
            Err(CursorError::PastEnd(_))
        ));
        assert!(matches!(
            listings.page_at(&encode_cursor(snapshot + 1, 2), Some("/w"), 2, now, all),
            Err(CursorError::Expired(_))
        ));
        let later = now + SNAPSHOT_LIFETIME;
        let error = listings
            .page_at(&cursor, Some("/w"), 2, later, all)
            .unwrap_err();
        assert!(matches!(error, CursorError::Expired(_)));
        assert!(error.to_string().contains("cursor"));
    }
}
