//! The conformance runner's target-profile parser (`ski_conformance::Target::parse`) and what a
//! run does next with a valid profile: every command's words, environment and working directory,
//! every template rendered with its placeholders filled in, and the profile written back as TOML
//! and parsed again to the same profile.

use std::collections::BTreeMap;
use std::path::Path;

use ski_conformance::Target as Profile;
use ski_conformance::target::{placeholders, render};

use super::{Target, message_class, text_of};
use crate::corpus::read_all;

pub const TARGET: Target = Target {
    name: "target-profile",
    about: "conformance target-profile parser, templates and TOML round trip",
    run,
    seeds,
    words: &[
        b"[suites.acp]",
        b"[suites.acp.commands.agent]",
        b"[suites.acp.auth]",
        b"[suites.intercom]",
        b"[vars]",
        b"[env]",
        b"argv = ",
        b"ready = ",
        b"capabilities = ",
        b"settings",
        b"overrides",
        b"discover = true",
        b"{temp_dir}",
        b"{port}",
        b"{",
        b"}",
        b"{{",
        b"\"'",
    ],
};

fn run(data: &[u8]) -> u64 {
    let text = text_of(data);
    let profile = match Profile::parse("fuzz.toml", &text) {
        Ok(profile) => profile,
        Err(error) => return message_class("error", &error.to_string()),
    };
    let known = profile.known_placeholders();
    let vars: BTreeMap<String, String> = known
        .iter()
        .map(|name| (name.clone(), "x".to_owned()))
        .collect();
    let mut templates: Vec<&str> = profile.vars.values().map(String::as_str).collect();
    for suite in profile.suites.values() {
        for command in suite.commands.values() {
            if let Ok(words) = command.words() {
                for word in words {
                    if let Ok(names) = placeholders(&word) {
                        let filled: BTreeMap<String, String> = names
                            .into_iter()
                            .map(|name| (name, "x".to_owned()))
                            .collect();
                        let _ = render(&word, &filled);
                    }
                }
            }
            let _ = command.env();
            let _ = command.cwd();
            let _ = command.ready();
        }
        templates.extend(suite.urls.values().map(String::as_str));
        templates.extend(suite.settings.values().map(String::as_str));
    }
    for template in templates {
        let _ = render(template, &vars);
    }
    let written = match toml::to_string(&profile) {
        Ok(written) => written,
        Err(error) => return message_class("unwritable", &error.to_string()),
    };
    match Profile::parse("fuzz.toml", &written) {
        Ok(again) => assert_eq!(again, profile, "a profile written back parses differently"),
        Err(error) => panic!("a valid profile written back does not parse: {error}\n{written}"),
    }
    let commands: usize = profile
        .suites
        .values()
        .map(|suite| suite.commands.len())
        .sum();
    message_class(
        "ok",
        &format!("{} {}", profile.suites.len().min(4), commands.min(4)),
    )
}

fn seeds(root: &Path) -> Vec<Vec<u8>> {
    read_all(&root.join("conformance").join("targets"), ".toml")
}
