//! Opaque, stable pagination cursors shaped as Slack's: base64 of `next_ts:<ts>` for message
//! pages (a post between two pages neither repeats nor skips an item) and `next_id:<id>` for
//! lists of ids.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn encode(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let word = chunk.iter().enumerate().fold(0u32, |word, (i, byte)| {
            word | u32::from(*byte) << (16 - 8 * i)
        });
        for place in 0..4 {
            if place <= chunk.len() {
                let index = (word >> (18 - 6 * place)) & 0x3f;
                text.push(char::from(ALPHABET[index as usize]));
            } else {
                text.push('=');
            }
        }
    }
    text
}

fn decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut bytes = Vec::with_capacity(text.len() * 3 / 4);
    let mut word = 0u32;
    let mut bits = 0;
    for char in text.bytes() {
        let value = ALPHABET.iter().position(|letter| *letter == char)?;
        word = word << 6 | u32::try_from(value).ok()?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            bytes.push(u8::try_from((word >> bits) & 0xff).ok()?);
        }
    }
    Some(bytes)
}

/// The cursor for the page after the item `value` of this `kind` (`ts` or `id`).
pub fn next(kind: &str, value: &str) -> String {
    encode(format!("next_{kind}:{value}").as_bytes())
}

/// The item a cursor of this `kind` points after; `Err` is `invalid_cursor`.
pub fn read(kind: &str, cursor: &str) -> Result<String, &'static str> {
    let bytes = decode(cursor).ok_or("invalid_cursor")?;
    let text = String::from_utf8(bytes).map_err(|_| "invalid_cursor")?;
    text.strip_prefix(&format!("next_{kind}:"))
        .filter(|value| !value.is_empty())
        .map(str::to_string)
        .ok_or("invalid_cursor")
}

/// One page of a list of items with ids (channels, users, members): the items after the
/// cursor's id, at most `limit` (Slack's default 100, at most 1000), and the next cursor (empty
/// on the last page). `Err` is `invalid_cursor` or `invalid_limit`.
pub fn page_by_id<T>(
    items: Vec<T>,
    id: impl Fn(&T) -> &str,
    cursor: Option<&str>,
    limit: Option<&str>,
) -> Result<(Vec<T>, String), &'static str> {
    let limit = match limit {
        Some(text) => text.parse::<usize>().map_err(|_| "invalid_limit")?,
        None => 100,
    };
    let limit = if limit == 0 { 100 } else { limit.min(1000) };
    let start = match cursor {
        Some(cursor) => {
            let after = read("id", cursor)?;
            items
                .iter()
                .position(|item| id(item) > after.as_str())
                .unwrap_or(items.len())
        }
        None => 0,
    };
    let mut items: Vec<T> = items.into_iter().skip(start).collect();
    let more = items.len() > limit;
    items.truncate(limit);
    let next = match items.last() {
        Some(last) if more => next("id", id(last)),
        _ => String::new(),
    };
    Ok((items, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_look_like_slacks() {
        assert_eq!(
            next("ts", "1512085861000543"),
            "bmV4dF90czoxNTEyMDg1ODYxMDAwNTQz"
        );
        assert_eq!(
            read("ts", &next("ts", "1.000002")).as_deref(),
            Ok("1.000002")
        );
        assert_eq!(read("ts", "%%"), Err("invalid_cursor"));
        assert_eq!(read("id", &next("ts", "1")), Err("invalid_cursor"));
    }
}
