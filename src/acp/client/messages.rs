//! The messages of a turn, put together from their streamed chunks: chunks with the same
//! `messageId` (compared as opaque strings) belong to one message, in the order the first chunk
//! of each arrived; chunks without an id belong to no message and are not kept here.

use crate::acp::{ContentChunk, SessionUpdate};

/// Whose message it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `user_message_chunk`.
    User,
    /// `agent_message_chunk`.
    Agent,
    /// `agent_thought_chunk`.
    Thought,
}

impl Role {
    /// The name used in the client's output: `user`, `agent` or `thought`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Agent => "agent",
            Role::Thought => "thought",
        }
    }
}

/// One message: its id, whose it is, and the text of its text chunks in arrival order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The `messageId` its chunks carry.
    pub message_id: String,
    /// Whose message it is (that of its first chunk).
    pub role: Role,
    /// The text of its text chunks, joined.
    pub text: String,
    /// How many chunks it has.
    pub chunks: usize,
}

/// The messages seen so far.
#[derive(Debug, Default)]
pub struct Messages {
    messages: Vec<Message>,
}

impl Messages {
    /// Takes the chunk `update` is, if it is one with a `messageId`; returns the id.
    pub fn push(&mut self, update: &SessionUpdate) -> Option<&str> {
        let (role, chunk): (Role, &ContentChunk) = match update {
            SessionUpdate::UserMessageChunk(chunk) => (Role::User, chunk),
            SessionUpdate::AgentMessageChunk(chunk) => (Role::Agent, chunk),
            SessionUpdate::AgentThoughtChunk(chunk) => (Role::Thought, chunk),
            _ => return None,
        };
        let id = chunk.message_id.as_deref()?;
        let index = match self.messages.iter().position(|m| m.message_id == id) {
            Some(index) => index,
            None => {
                self.messages.push(Message {
                    message_id: id.to_owned(),
                    role,
                    text: String::new(),
                    chunks: 0,
                });
                self.messages.len() - 1
            }
        };
        let message = &mut self.messages[index];
        message.chunks += 1;
        if let Some(text) = chunk.content.as_text() {
            message.text.push_str(text);
        }
        Some(&message.message_id)
    }

    /// The messages, oldest first, leaving none.
    pub fn take(&mut self) -> Vec<Message> {
        std::mem::take(&mut self.messages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acp::ContentBlock;

    fn chunk(role: Role, id: Option<&str>, text: &str) -> SessionUpdate {
        let mut chunk = ContentChunk::new(ContentBlock::text(text));
        chunk.message_id = id.map(str::to_owned);
        match role {
            Role::User => SessionUpdate::UserMessageChunk(chunk),
            Role::Agent => SessionUpdate::AgentMessageChunk(chunk),
            Role::Thought => SessionUpdate::AgentThoughtChunk(chunk),
        }
    }

    #[test]
    fn chunks_group_by_their_id_in_order_of_first_arrival() {
        let mut messages = Messages::default();
        messages.push(&chunk(Role::Agent, Some("b"), "Hel"));
        messages.push(&chunk(Role::Thought, Some("a"), "hm"));
        messages.push(&chunk(Role::Agent, Some("b"), "lo"));
        assert_eq!(messages.push(&chunk(Role::Agent, None, "loose")), None);
        let taken = messages.take();
        assert_eq!(taken.len(), 2);
        assert_eq!(
            (
                taken[0].message_id.as_str(),
                taken[0].role,
                taken[0].text.as_str(),
                taken[0].chunks
            ),
            ("b", Role::Agent, "Hello", 2)
        );
        assert_eq!(
            (taken[1].role, taken[1].text.as_str()),
            (Role::Thought, "hm")
        );
        assert!(messages.take().is_empty());
    }
}
