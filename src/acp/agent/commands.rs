//! The reference agent's scripted commands and its end-of-turn report: `/notice TEXT` and
//! `/compact` (offered in `available_commands_update`), and the `usage_update` of a turn.
//!
//! - `/notice TEXT` sends a `notice` (severity `info`, title `TEXT`) when the session's owner
//!   advertised `session.notices`; otherwise the text goes out as an agent message, as ACP's
//!   notice text allows, and no `notice` is sent.
//! - `/compact` compacts the session's history into a summary: `compaction_update`
//!   (`in_progress`), one `compaction_summary_chunk`, then `compaction_update` (`completed`),
//!   all under one `compactionId`, when the owner advertised `session.compaction`; otherwise
//!   nothing about compaction is sent (the history is compacted all the same).
//! - Usage: the words of the history (prompts and replies) stand for the tokens in context, of
//!   a context window of [`CONTEXT_WINDOW`] tokens.

use super::Inner;
use super::control::{TurnControl, TurnOutcome};
use super::model;
use super::store::HistoryEntry;
use crate::acp::{
    AvailableCommand, AvailableCommandInput, CompactionStatus, CompactionSummaryChunk,
    CompactionUpdate, ContentBlock, Extra, Notice, NoticeSeverity, SessionUpdate, UsageUpdate,
};

/// The context window the reference reports, in tokens.
pub const CONTEXT_WINDOW: u64 = 200_000;

/// A scripted command a prompt's text starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `/notice TEXT`.
    Notice(String),
    /// `/compact`.
    Compact,
}

impl Command {
    /// The command a prompt asks for, if its first text block starts with one.
    pub fn of(prompt: &[ContentBlock]) -> Option<Command> {
        let text = prompt.iter().find_map(ContentBlock::as_text)?.trim();
        if let Some(rest) = text.strip_prefix("/notice") {
            let title = rest.trim();
            let starts_word = rest.is_empty() || rest.starts_with(char::is_whitespace);
            return starts_word.then(|| {
                Command::Notice(if title.is_empty() {
                    "Notice".to_owned()
                } else {
                    title.to_owned()
                })
            });
        }
        (text == "/compact").then_some(Command::Compact)
    }
}

/// The commands the reference offers besides `echo`.
pub fn offered() -> Vec<AvailableCommand> {
    vec![
        AvailableCommand {
            name: "notice".to_owned(),
            description: "Show the text as a notice (an agent message for a client without \
                          session.notices)"
                .to_owned(),
            input: Some(AvailableCommandInput {
                hint: "the notice's title".to_owned(),
                extra: Extra::new(),
            }),
            extra: Extra::new(),
        },
        AvailableCommand {
            name: "compact".to_owned(),
            description: "Compact the session's history into a summary".to_owned(),
            input: None,
            extra: Extra::new(),
        },
    ]
}

/// Runs the command of a prompt, if it has one.
pub(crate) async fn run(
    agent: &Inner,
    session: &str,
    control: &TurnControl,
    prompt: &[ContentBlock],
) -> Result<(), TurnOutcome> {
    let Some(command) = Command::of(prompt) else {
        return Ok(());
    };
    let client = agent.registry.owner_peer(session).ok().map(|(_, _, c)| c);
    match command {
        Command::Notice(title) => {
            if client.as_ref().is_some_and(|c| c.shows_notices()) {
                let notice = Notice {
                    severity: NoticeSeverity::Info,
                    title,
                    description: None,
                    extra: Extra::new(),
                };
                agent
                    .content(session, control, SessionUpdate::Notice(notice))
                    .await
            } else {
                // A message of its own, with its own id as every agent message has.
                let update = SessionUpdate::AgentMessageChunk(crate::acp::ContentChunk {
                    message_id: Some(super::turn::new_message_id()),
                    ..crate::acp::ContentChunk::new(ContentBlock::text(title))
                });
                agent.content(session, control, update).await
            }
        }
        Command::Compact => {
            let summary = agent.compact(session);
            if !client.as_ref().is_some_and(|c| c.shows_compaction()) {
                return Ok(());
            }
            let id = format!("compaction_{}", uuid::Uuid::new_v4().simple());
            let state = |status, summary: Option<Vec<ContentBlock>>| {
                SessionUpdate::CompactionUpdate(CompactionUpdate {
                    compaction_id: id.clone(),
                    status,
                    summary,
                    error: None,
                    extra: Extra::new(),
                })
            };
            agent
                .content(session, control, state(CompactionStatus::InProgress, None))
                .await?;
            let chunk = SessionUpdate::CompactionSummaryChunk(CompactionSummaryChunk {
                compaction_id: id.clone(),
                content: ContentBlock::text(summary),
                extra: Extra::new(),
            });
            agent.content(session, control, chunk).await?;
            agent
                .content(session, control, state(CompactionStatus::Completed, None))
                .await
        }
    }
}

/// The words of a history entry, standing for its tokens.
pub(crate) fn words(entry: &HistoryEntry) -> u64 {
    let count = |text: &str| text.split_whitespace().count() as u64;
    match entry {
        HistoryEntry::User { prompt, .. } => count(&model::describe(&prompt.clone().into_blocks())),
        HistoryEntry::Agent { text, .. } => count(text),
        HistoryEntry::Tool(record) => count(&record.output.to_string()),
    }
}

/// The `usage_update` of a history of `words` words.
pub fn usage(words: u64) -> UsageUpdate {
    UsageUpdate {
        used: words.min(CONTEXT_WINDOW),
        size: CONTEXT_WINDOW,
        cost: None,
        extra: Extra::new(),
    }
}

/// The summary text of a compacted history of `entries` entries.
pub fn summary(entries: usize) -> String {
    format!("{entries} earlier entries of the conversation, compacted")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_read_from_the_first_text() {
        let of = |text: &str| Command::of(&[ContentBlock::text(text)]);
        assert_eq!(
            of("/notice  Build done "),
            Some(Command::Notice("Build done".into()))
        );
        assert_eq!(of("/notice"), Some(Command::Notice("Notice".into())));
        assert_eq!(of("/compact"), Some(Command::Compact));
        assert_eq!(of("/noticed"), None);
        assert_eq!(of("/compact now"), None);
        assert_eq!(of("hello"), None);
    }

    #[test]
    fn usage_counts_the_words_of_the_history() {
        let history = [
            HistoryEntry::user(&[ContentBlock::text("one two three")], "msg_1".into()),
            HistoryEntry::agent("one two three".into(), "msg_2".into()),
        ];
        let usage = usage(history.iter().map(words).sum());
        assert_eq!((usage.used, usage.size), (6, CONTEXT_WINDOW));
        assert_eq!(super::usage(u64::MAX).used, CONTEXT_WINDOW);
    }
}
