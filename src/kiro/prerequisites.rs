//! What must hold before the bot starts (BR-02): `kiro-cli` on `PATH`, the template directory,
//! the agent JSON in it, and a writable workspace base (created when missing). Every failure is
//! reported, and every one is fatal (BR-02.5).

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::config::{KiroConfig, Violation};

/// The program the bot runs.
pub const KIRO_CLI: &str = "kiro-cli";

/// What the checks found when they all passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prerequisites {
    /// The `kiro-cli` executable found on `PATH`.
    pub kiro_cli: PathBuf,
    /// The workspace base directory, created if it was missing.
    pub workspace: PathBuf,
}

/// Finds `program` in the directories of `path` (a `PATH` value), as `shutil.which` does: the
/// first regular file with an execute bit.
pub fn which(program: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    let path = path?;
    std::env::split_paths(path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}

/// Checks every prerequisite of `config`, with `path` as the `PATH` to search.
pub fn check(config: &KiroConfig, path: Option<&OsStr>) -> Result<Prerequisites, Vec<Violation>> {
    let mut violations = Vec::new();
    let kiro_cli = which(KIRO_CLI, path);
    if kiro_cli.is_none() {
        violations.push(Violation::new(
            "PATH",
            "BR-02.1",
            "kiro-cli not found on PATH; install it or put a stand-in there",
        ));
    }
    let template = config.config_path();
    if template.is_dir() {
        let agent_json = template
            .join("agents")
            .join(config.agent_name().json_file());
        if !is_regular_file(&agent_json) {
            violations.push(Violation::new(
                "KIRO_CONFIG_PATH",
                "BR-02.3",
                format!("agent config not found: {}", agent_json.display()),
            ));
        }
    } else {
        violations.push(Violation::new(
            "KIRO_CONFIG_PATH",
            "BR-02.2",
            format!("kiro config directory not found: {}", template.display()),
        ));
    }
    let workspace = config.workspace_base_path();
    if let Err(error) = ensure_writable(workspace) {
        violations.push(Violation::new(
            "WORKSPACE_BASE_PATH",
            "BR-02.4",
            format!(
                "workspace directory not writable: {} ({error})",
                workspace.display()
            ),
        ));
    }
    match kiro_cli {
        Some(kiro_cli) if violations.is_empty() => Ok(Prerequisites {
            kiro_cli,
            workspace: workspace.to_owned(),
        }),
        _ => Err(violations),
    }
}

fn is_regular_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_file())
}

/// Creates `dir` (with its parents) and proves it writable by creating and removing a file.
fn ensure_writable(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let probe = dir.join(format!(".ski-kiro-write-probe-{}", std::process::id()));
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn config(template: &Path, workspace: &Path) -> KiroConfig {
        let values: BTreeMap<String, String> = [
            ("BOT_TOKEN", "t"),
            ("KIRO_AGENT_NAME", "tg-acp"),
            ("KIRO_CONFIG_PATH", &*template.to_string_lossy()),
            ("WORKSPACE_BASE_PATH", &*workspace.to_string_lossy()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        KiroConfig::from_values(&values).unwrap()
    }

    #[test]
    fn reports_every_missing_prerequisite() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "x").unwrap();
        let config = config(&dir.path().join("missing"), &blocker.join("ws"));
        let empty = dir.path().join("empty-bin");
        std::fs::create_dir(&empty).unwrap();
        let rules: Vec<String> = check(&config, Some(empty.as_os_str()))
            .unwrap_err()
            .into_iter()
            .map(|v| v.rule)
            .collect();
        assert_eq!(rules, ["BR-02.1", "BR-02.2", "BR-02.4"]);
    }

    #[test]
    fn passes_and_creates_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let program = bin.join(KIRO_CLI);
        std::fs::write(&program, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        let template = dir.path().join("tpl");
        std::fs::create_dir_all(template.join("agents")).unwrap();
        let config = config(&template, &dir.path().join("ws/a/b"));
        let rules: Vec<String> = check(&config, Some(bin.as_os_str()))
            .unwrap_err()
            .into_iter()
            .map(|v| v.rule)
            .collect();
        assert_eq!(rules, ["BR-02.3"]);
        std::fs::write(template.join("agents/tg-acp.json"), "{}").unwrap();
        let found = check(&config, Some(bin.as_os_str())).unwrap();
        assert_eq!(found.kiro_cli, program);
        assert!(dir.path().join("ws/a/b").is_dir());
    }
}
