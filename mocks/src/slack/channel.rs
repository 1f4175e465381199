//! A conversation as the workspace keeps it while the app changes it: public and private
//! channels from the configuration, channels the app creates, and direct messages (IM and MPIM),
//! with their members, topic, purpose and archive state.

use serde_json::{Value, json};

use super::config::ChannelConfig;

/// What kind of conversation a channel is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Public,
    Private,
    /// A direct message with one user.
    Im,
    /// A group direct message.
    Mpim,
}

impl Kind {
    /// The name `types` filters use (`public_channel,private_channel,mpim,im`).
    pub fn type_name(self) -> &'static str {
        match self {
            Kind::Public => "public_channel",
            Kind::Private => "private_channel",
            Kind::Im => "im",
            Kind::Mpim => "mpim",
        }
    }
}

/// A topic or a purpose.
#[derive(Debug, Clone, Default)]
pub struct Text {
    pub value: String,
    pub creator: String,
    pub last_set: u64,
}

impl Text {
    fn json(&self) -> Value {
        json!({ "value": self.value, "creator": self.creator, "last_set": self.last_set })
    }
}

#[derive(Debug, Clone)]
pub struct Channel {
    pub id: String,
    pub name: String,
    pub kind: Kind,
    pub members: Vec<String>,
    pub topic: Text,
    pub purpose: Text,
    pub archived: bool,
    pub created: u64,
    pub creator: String,
    /// For an IM that the app closed with `conversations.close`.
    pub open: bool,
}

impl Channel {
    /// A configured channel; no members listed means every user and the bot.
    pub fn configured(config: &ChannelConfig, everyone: &[String], creator: &str) -> Channel {
        Channel {
            id: config.id.clone(),
            name: config.name.clone(),
            kind: if config.private {
                Kind::Private
            } else {
                Kind::Public
            },
            members: if config.members.is_empty() {
                everyone.to_vec()
            } else {
                config.members.clone()
            },
            topic: Text::default(),
            purpose: Text::default(),
            archived: false,
            created: 1_700_000_000,
            creator: creator.to_string(),
            open: true,
        }
    }

    pub fn is_dm(&self) -> bool {
        matches!(self.kind, Kind::Im | Kind::Mpim)
    }

    pub fn is_member(&self, user: &str) -> bool {
        self.members.iter().any(|member| member == user)
    }

    /// The channel object of `conversations.info`, `conversations.list` and the like, as the
    /// app (`viewer`) sees it.
    pub fn json(&self, team: &str, viewer: &str) -> Value {
        let mut channel = json!({
            "id": self.id,
            "created": self.created,
            "is_archived": self.archived,
            "is_im": self.kind == Kind::Im,
            "is_mpim": self.kind == Kind::Mpim,
            "is_org_shared": false,
            "context_team_id": team,
            "updated": self.created * 1000,
        });
        if self.kind == Kind::Im {
            channel["user"] = json!(
                self.members
                    .iter()
                    .find(|member| *member != viewer)
                    .or(self.members.first())
            );
            channel["is_user_deleted"] = json!(false);
            channel["is_open"] = json!(self.open);
            channel["priority"] = json!(0);
            return channel;
        }
        let extra = json!({
            "name": self.name,
            "name_normalized": self.name,
            "creator": self.creator,
            "is_channel": self.kind == Kind::Public,
            "is_group": self.kind == Kind::Private,
            "is_private": self.kind != Kind::Public,
            "is_general": self.name == "general",
            "is_shared": false,
            "is_ext_shared": false,
            "is_pending_ext_shared": false,
            "is_member": self.is_member(viewer),
            "unlinked": 0,
            "topic": self.topic.json(),
            "purpose": self.purpose.json(),
            "previous_names": [],
            "num_members": self.members.len(),
        });
        if let (Some(channel), Value::Object(extra)) = (channel.as_object_mut(), extra) {
            channel.extend(extra);
        }
        channel
    }
}
