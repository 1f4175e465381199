//! The log writer of `ski intercom`: every log record is scrubbed of the Slack token values
//! before it reaches stderr, so no library's trace output (headers, URLs, errors) can leak them,
//! whatever `RUST_LOG` says.

use std::io::Write;
use std::sync::Arc;

use tracing_subscriber::fmt::MakeWriter;

/// What replaces a secret in the log.
pub const REDACTED: &str = "<redacted>";

/// Makes one [`RedactingWriter`] per log record.
#[derive(Clone)]
pub struct RedactingStderr {
    secrets: Arc<Vec<String>>,
}

impl RedactingStderr {
    /// Scrubs these values (empty ones are ignored).
    pub fn new(secrets: impl IntoIterator<Item = String>) -> RedactingStderr {
        RedactingStderr {
            secrets: Arc::new(secrets.into_iter().filter(|s| !s.is_empty()).collect()),
        }
    }

    /// `text` with every secret replaced by [`REDACTED`].
    pub fn scrub(&self, text: &str) -> String {
        self.secrets.iter().fold(text.to_string(), |text, secret| {
            text.replace(secret, REDACTED)
        })
    }
}

/// Collects one record and writes it scrubbed to stderr when dropped.
pub struct RedactingWriter {
    make: RedactingStderr,
    record: Vec<u8>,
}

impl Write for RedactingWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.record.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.record.is_empty() {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&self.record);
        let scrubbed = self.make.scrub(&text);
        self.record.clear();
        let mut stderr = std::io::stderr().lock();
        stderr.write_all(scrubbed.as_bytes())?;
        stderr.flush()
    }
}

impl Drop for RedactingWriter {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

impl<'a> MakeWriter<'a> for RedactingStderr {
    type Writer = RedactingWriter;

    fn make_writer(&'a self) -> Self::Writer {
        RedactingWriter {
            make: self.clone(),
            record: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_occurrence_of_every_secret_is_replaced() {
        let make = RedactingStderr::new(["xoxb-1".to_string(), "xapp-2".into(), String::new()]);
        assert_eq!(
            make.scrub("authorization: Bearer xoxb-1; app xapp-2 xoxb-1"),
            "authorization: Bearer <redacted>; app <redacted> <redacted>"
        );
        assert_eq!(make.scrub("nothing here"), "nothing here");
    }
}
