//! The remote transport client's cookie jar: what the server sets with `Set-Cookie` goes back in
//! `Cookie` on every later request to it (the RFD requires cookies kept for session affinity).
//!
//! One jar serves one endpoint, so a cookie's `Domain` and `Path` are not consulted; `Max-Age`
//! of zero or less removes it. At most [`MAX_COOKIES`] cookies of at most [`MAX_COOKIE_BYTES`]
//! each are kept; further ones are ignored.

use hyper::header::{HeaderMap, HeaderValue, SET_COOKIE};

/// The most cookies a jar keeps.
pub const MAX_COOKIES: usize = 64;

/// The longest `name=value` a jar keeps.
pub const MAX_COOKIE_BYTES: usize = 4096;

/// Cookies in the order they were first set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CookieJar {
    cookies: Vec<(String, String)>,
}

impl CookieJar {
    /// Takes every `Set-Cookie` of a response.
    pub fn store(&mut self, headers: &HeaderMap) {
        for value in headers.get_all(SET_COOKIE) {
            if let Ok(text) = value.to_str() {
                self.set(text);
            }
        }
    }

    /// Takes one `Set-Cookie` value.
    pub fn set(&mut self, text: &str) {
        let mut parts = text.split(';');
        let Some((name, value)) = parts.next().and_then(|pair| pair.split_once('=')) else {
            return;
        };
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() || name.len() + value.len() > MAX_COOKIE_BYTES {
            return;
        }
        let expired = parts.any(|attribute| {
            attribute.split_once('=').is_some_and(|(key, age)| {
                key.trim().eq_ignore_ascii_case("max-age")
                    && age.trim().parse::<i64>().is_ok_and(|age| age <= 0)
            })
        });
        let known = self.cookies.iter().position(|(known, _)| known == name);
        match (known, expired) {
            (Some(index), true) => {
                self.cookies.remove(index);
            }
            (Some(index), false) => self.cookies[index].1 = value.to_owned(),
            (None, false) if self.cookies.len() < MAX_COOKIES => {
                self.cookies.push((name.to_owned(), value.to_owned()));
            }
            (None, _) => {}
        }
    }

    /// The `Cookie` header to send, or `None` when the jar is empty.
    pub fn header(&self) -> Option<HeaderValue> {
        if self.cookies.is_empty() {
            return None;
        }
        let text = self
            .cookies
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join("; ");
        HeaderValue::from_str(&text).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_kept_replaced_and_expired() {
        let mut jar = CookieJar::default();
        assert_eq!(jar.header(), None);
        jar.set("affinity=node-1; Path=/; HttpOnly");
        jar.set("b=2");
        jar.set("affinity=node-2");
        assert_eq!(jar.header().unwrap(), "affinity=node-2; b=2");
        jar.set("b=; Max-Age=0");
        assert_eq!(jar.header().unwrap(), "affinity=node-2");
        jar.set("no pair here");
        assert_eq!(jar.header().unwrap(), "affinity=node-2");
    }
}
