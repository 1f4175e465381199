//! The remote transport client's cookie jar: what the server sets with `Set-Cookie` goes back in
//! `Cookie` on every later request to it (the RFD requires cookies kept for session affinity).
//!
//! One jar serves one endpoint, so a cookie's `Domain` and `Path` are not consulted; `Max-Age`
//! of zero or less removes it. A cookie marked `Secure` is sent only over `https://`, and one set
//! over cleartext `http://` is ignored (a cleartext server may not set a secure cookie). At most [`MAX_COOKIES`] cookies of at most [`MAX_COOKIE_BYTES`]
//! each are kept; further ones are ignored.

use hyper::header::{HeaderMap, HeaderValue, SET_COOKIE};

/// The most cookies a jar keeps.
pub const MAX_COOKIES: usize = 64;

/// The longest `name=value` a jar keeps.
pub const MAX_COOKIE_BYTES: usize = 4096;

/// One kept cookie.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cookie {
    name: String,
    value: String,
    /// Marked `Secure`: sent only over TLS.
    secure: bool,
}

/// Cookies in the order they were first set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CookieJar {
    cookies: Vec<Cookie>,
}

impl CookieJar {
    /// Takes every `Set-Cookie` of a response that came over TLS (`secure`) or not.
    pub fn store(&mut self, headers: &HeaderMap, secure: bool) {
        for value in headers.get_all(SET_COOKIE) {
            if let Ok(text) = value.to_str() {
                self.set(text, secure);
            }
        }
    }

    /// Takes one `Set-Cookie` value that came over TLS (`secure`) or not.
    pub fn set(&mut self, text: &str, secure: bool) {
        let mut parts = text.split(';');
        let Some((name, value)) = parts.next().and_then(|pair| pair.split_once('=')) else {
            return;
        };
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() || name.len() + value.len() > MAX_COOKIE_BYTES {
            return;
        }
        let (mut expired, mut marked_secure) = (false, false);
        for attribute in parts {
            let (key, argument) = attribute.split_once('=').unwrap_or((attribute, ""));
            let key = key.trim();
            if key.eq_ignore_ascii_case("max-age")
                && argument.trim().parse::<i64>().is_ok_and(|age| age <= 0)
            {
                expired = true;
            } else if key.eq_ignore_ascii_case("secure") {
                marked_secure = true;
            }
        }
        if marked_secure && !secure {
            return;
        }
        let known = self.cookies.iter().position(|known| known.name == name);
        match (known, expired) {
            (Some(index), true) => {
                self.cookies.remove(index);
            }
            (Some(index), false) => {
                self.cookies[index].value = value.to_owned();
                self.cookies[index].secure = marked_secure;
            }
            (None, false) if self.cookies.len() < MAX_COOKIES => {
                self.cookies.push(Cookie {
                    name: name.to_owned(),
                    value: value.to_owned(),
                    secure: marked_secure,
                });
            }
            (None, _) => {}
        }
    }

    /// The `Cookie` header to send over TLS (`secure`) or not, or `None` when no cookie goes.
    pub fn header(&self, secure: bool) -> Option<HeaderValue> {
        let text = self
            .cookies
            .iter()
            .filter(|cookie| secure || !cookie.secure)
            .map(|cookie| format!("{}={}", cookie.name, cookie.value))
            .collect::<Vec<_>>()
            .join("; ");
        if text.is_empty() {
            return None;
        }
        HeaderValue::from_str(&text).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_kept_replaced_and_expired() {
        let mut jar = CookieJar::default();
        assert_eq!(jar.header(false), None);
        jar.set("affinity=node-1; Path=/; HttpOnly", false);
        jar.set("b=2", false);
        jar.set("affinity=node-2", false);
        assert_eq!(jar.header(false).unwrap(), "affinity=node-2; b=2");
        jar.set("b=; Max-Age=0", false);
        assert_eq!(jar.header(false).unwrap(), "affinity=node-2");
        jar.set("no pair here", false);
        assert_eq!(jar.header(false).unwrap(), "affinity=node-2");
    }

    #[test]
    fn secure_cookies_go_only_over_tls() {
        let mut jar = CookieJar::default();
        jar.set("plain=1", true);
        jar.set("locked=2; Secure; HttpOnly", true);
        assert_eq!(jar.header(true).unwrap(), "plain=1; locked=2");
        assert_eq!(jar.header(false).unwrap(), "plain=1");
        let mut cleartext = CookieJar::default();
        cleartext.set("locked=2; Secure", false);
        assert_eq!(cleartext.header(true), None);
    }
}
