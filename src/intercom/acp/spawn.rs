//! How an agent process is started: `host_cli` with `host_cli_args` (the prompt never in argv),
//! its own process group, the workspace's directory, an environment cleared to an allowlist plus
//! `INTERCOM_SESSION_ID`, and killed by the system if the server dies; and how the next start
//! ends agents a killed server left behind.

use std::path::Path;

use crate::transport::child::ChildSpec;

/// The environment variables a spawned agent inherits; everything else (the Slack tokens
/// first) is withheld.
pub const ENV_ALLOWLIST: &[&str] = &["PATH", "HOME", "RUST_LOG", "LANG", "TMPDIR"];

/// The variable naming the agent's session.
pub const SESSION_ENV: &str = "INTERCOM_SESSION_ID";

/// The spec of one agent process.
pub fn agent_spec(
    session_id: &str,
    host_cli: &str,
    host_cli_args: &[String],
    cwd: Option<&Path>,
) -> ChildSpec {
    let mut spec = ChildSpec::new(format!("agent-{}", short(session_id)), host_cli)
        .args(host_cli_args)
        .env_clear()
        .env(SESSION_ENV, session_id)
        .die_with_parent();
    for name in ENV_ALLOWLIST {
        if let Some(value) = std::env::var_os(name) {
            spec = spec.env(name, value);
        }
    }
    if let Some(dir) = cwd {
        spec = spec.cwd(dir);
    }
    spec
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

/// Ends what is left of an agent an earlier run started for `session_id` in process group
/// `pgid`: every member of the group whose environment names that session gets SIGKILL (the
/// check keeps a recycled group id from hitting a stranger). Answers how many were signalled.
#[cfg(target_os = "linux")]
pub fn kill_leftover(session_id: &str, pgid: u32) -> usize {
    use crate::transport::child::procfs;
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let needle = format!("{SESSION_ENV}={session_id}");
    let Ok(pgid) = i32::try_from(pgid) else {
        return 0;
    };
    procfs::all()
        .iter()
        .filter(|p| p.pgid == pgid && procfs::environ_holds(p.pid, &needle))
        .filter(|p| kill(Pid::from_raw(p.pid), Signal::SIGKILL).is_ok())
        .count()
}

/// Elsewhere leftovers are not found.
#[cfg(not(target_os = "linux"))]
pub fn kill_leftover(_session_id: &str, _pgid: u32) -> usize {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_is_the_allowlist_and_the_session() {
        let spec = agent_spec("0123456789", "agent", &["--x".into()], None);
        let names: Vec<String> = spec
            .get_env()
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert!(names.contains(&SESSION_ENV.to_string()));
        assert!(
            names
                .iter()
                .all(|n| n == SESSION_ENV || ENV_ALLOWLIST.contains(&n.as_str()))
        );
        assert_eq!(spec.get_args(), ["--x"]);
    }
}
