//! One message routed through the adapter and everything it did: the route report, the exit
//! code and the events it logged (read back from the log, not taken from the report).

use serde_json::Value;

use super::adapter::{Adapter, Output};
use super::events::Events;
use super::expect;
use crate::CheckError;

/// A routed message.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The adapter's output.
    pub output: Output,
    /// The route report (`outcome`, `type`, `taskId`, `reason`, `transitions`, `events`).
    pub report: Value,
    /// The events in the log after the message, in order.
    pub events: Events,
}

/// Routes `text` at `now` and expects the report's `outcome` (with its exit code).
pub async fn route_text(
    adapter: &Adapter,
    text: &str,
    now: &str,
    outcome: &str,
) -> Result<Delivery, CheckError> {
    let mark = Events::mark(adapter).await?;
    let output = adapter.route_text(text, now).await?;
    let events = Events::since(adapter, mark).await?;
    let report = expect::routed(&output, outcome, Some(&events.summary()))?;
    Ok(Delivery {
        output,
        report,
        events,
    })
}

/// Routes `message` (sent as compact JSON) at `now` and expects `outcome`.
pub async fn route(
    adapter: &Adapter,
    message: &Value,
    now: &str,
    outcome: &str,
) -> Result<Delivery, CheckError> {
    route_text(adapter, &message.to_string(), now, outcome).await
}
