//! The mock agent's script parser (`ski_mocks::agent::Script::parse`): TOML text in, a checked
//! script or an error out.

use std::path::Path;

use ski_mocks::agent::Script;

use super::{Target, message_class, text_of};
use crate::corpus::read_all;

pub const TARGET: Target = Target {
    name: "mock-script",
    about: "mock agent's TOML script parser",
    run,
    seeds,
    words: &[
        b"[agent]",
        b"[[prompt]]",
        b"[[fault]]",
        b"[kiro]",
        b"[intercom]",
        b"[recording]",
        b"[[exchange]]",
        b"[[exchange.agent]]",
        b"match = ",
        b"reply = ",
        b"personality = ",
        b"capabilities = ",
        b"initialize_result = ",
        b"session_result = ",
        b"quirks = ",
        b"after_ms = ",
        b"at_ms = ",
        b"regex",
        b"(?i)",
        b"[a-",
        b"{{",
        b"}}",
    ],
};

fn run(data: &[u8]) -> u64 {
    let text = text_of(data);
    match Script::parse(&text, "fuzz.toml") {
        Ok(script) => {
            let _ = script.waits_for_messages();
            message_class("ok", "")
        }
        Err(error) => message_class("error", &error.to_string()),
    }
}

fn seeds(root: &Path) -> Vec<Vec<u8>> {
    let mut seeds = read_all(&root.join("mocks").join("scripts"), ".toml");
    seeds.extend(read_all(&root.join("golden").join("recordings"), ".toml"));
    seeds
}
