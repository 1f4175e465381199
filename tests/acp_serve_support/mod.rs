//! Support for the tests that start `ski acp serve` on a listener (WebSocket or the remote
//! `/acp` endpoint): the address it prints on stderr once it accepts connections.

use std::time::Duration;

use ski::transport::child::Child;

/// The address in the server's `listening on ADDRESS` line, read from its stderr; the test fails
/// when the line has not come within `limit` or stderr ends first.
pub async fn listening_url(server: &mut Child, limit: Duration) -> String {
    let readiness = async {
        loop {
            let line = server
                .next_stderr_line()
                .await
                .expect("the server's stderr ended before it was listening");
            if let Some(url) = line.strip_prefix("listening on ") {
                break url.trim().to_owned();
            }
        }
    };
    tokio::time::timeout(limit, readiness)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for the readiness line"))
}
