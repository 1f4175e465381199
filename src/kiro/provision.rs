//! The provisioner (BR-03, BR-04): syncs the agent's entries of `agents/`, `steering/` and
//! `skills/` from the template into the kiro home by deleting every destination entry whose
//! name starts with the agent name and copying every template entry that does.
//!
//! Safety, checked before anything is touched:
//! - the template must hold `agents/NAME.json` as a regular file (BR-03.4);
//! - at most [`SAFETY_LIMIT`] matching entries in the destination, and in the template
//!   (BR-03.3, E-KIRO-05);
//! - no symbolic link among the template's matching entries, at any depth, and no managed
//!   directory of the destination that is a symbolic link (E-KIRO-06);
//! - nothing but regular files and directories among the template's matching entries (a FIFO
//!   or device would block the copy);
//! - entries without the prefix are never opened (BR-03.2).
//!
//! `{{KIRO_HOME}}` in a top-level `.json` entry is replaced with the kiro home's absolute path,
//! as upstream does; other files and directories are copied as they are (file modes kept).
//! Files are read without blocking and written through [`storage::inside_root`] below the kiro
//! home (no link out of it followed, no final link written through). Afterwards
//! `agents/NAME.json` must exist in the destination (BR-03.5).
//!
//! [`storage::inside_root`]: crate::storage::inside_root

use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::agent_name::AgentName;
use crate::storage::inside_root::{self, InsideRootError, Root};

/// The most matching entries the provisioner accepts (BR-03.3).
pub const SAFETY_LIMIT: usize = 20;

/// The directories it manages, in sync order (BR-04.3).
pub const MANAGED_DIRS: [&str; 3] = ["agents", "steering", "skills"];

/// The placeholder replaced in `.json` files.
pub const KIRO_HOME_PLACEHOLDER: &str = "{{KIRO_HOME}}";

/// Why provisioning stopped; nothing was changed unless the error is [`ProvisionError::Io`] or
/// [`ProvisionError::PostCheck`].
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    /// The template has no agent JSON (BR-03.4).
    #[error("refusing to sync an empty template: {path} is missing")]
    EmptyTemplate {
        /// The agent JSON that should exist.
        path: PathBuf,
    },
    /// Too many matching entries (BR-03.3).
    #[error(
        "safety limit exceeded: {count} entries in the {side} start with {prefix:?} (limit {SAFETY_LIMIT})"
    )]
    SafetyLimit {
        /// `destination` or `template`.
        side: &'static str,
        /// The agent name.
        prefix: String,
        /// How many entries matched.
        count: usize,
    },
    /// A symbolic link where the provisioner would follow it (E-KIRO-06).
    #[error("refusing to sync a symbolic link: {path}")]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// A template entry that is neither a regular file nor a directory.
    #[error("refusing to sync {path}: it is {kind}, not a regular file or a directory")]
    NotRegular {
        /// The entry.
        path: PathBuf,
        /// What it is: `a FIFO`, `a socket`, ...
        kind: &'static str,
    },
    /// A destination path that cannot be written inside the kiro home.
    #[error("cannot install into the kiro home: {0}")]
    Destination(#[source] InsideRootError),
    /// A file-system operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// On what.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The agent JSON is missing after the sync (BR-03.5).
    #[error("post-check failed: {path} does not exist after the sync")]
    PostCheck {
        /// The agent JSON that should exist.
        path: PathBuf,
    },
}

impl ProvisionError {
    /// The business rule behind the refusal, when there is one.
    pub fn rule(&self) -> Option<&'static str> {
        match self {
            Self::EmptyTemplate { .. } => Some("BR-03.4"),
            Self::SafetyLimit { .. } => Some("BR-03.3"),
            Self::PostCheck { .. } => Some("BR-03.5"),
            Self::Symlink { .. }
            | Self::NotRegular { .. }
            | Self::Destination(..)
            | Self::Io { .. } => None,
        }
    }
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> ProvisionError {
    let path = path.to_owned();
    move |source| ProvisionError::Io {
        action,
        path,
        source,
    }
}

/// What a sync did, with paths relative to the kiro home.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProvisionReport {
    /// The kiro home (absolute).
    #[serde(rename = "kiroHome")]
    pub kiro_home: PathBuf,
    /// Entries deleted, for example `agents/tg-acp.json`.
    pub deleted: Vec<String>,
    /// Entries copied.
    pub copied: Vec<String>,
}

/// A provisioner of one agent from one template into one kiro home.
#[derive(Debug, Clone)]
pub struct Provisioner {
    template: PathBuf,
    kiro_home: PathBuf,
    agent: AgentName,
}

impl Provisioner {
    /// A provisioner of `agent` from `template` into `kiro_home` (made absolute).
    pub fn new(template: &Path, kiro_home: &Path, agent: AgentName) -> io::Result<Self> {
        Ok(Self {
            template: template.to_owned(),
            kiro_home: std::path::absolute(kiro_home)?,
            agent,
        })
    }

    /// The kiro home it writes into.
    pub fn kiro_home(&self) -> &Path {
        &self.kiro_home
    }

    /// Runs the sync: checks, deletes, copies, post-check.
    pub fn provision(&self) -> Result<ProvisionReport, ProvisionError> {
        let agent_json = self.template.join("agents").join(self.agent.json_file());
        let is_file = std::fs::symlink_metadata(&agent_json).is_ok_and(|m| m.is_file());
        if !is_file {
            return Err(ProvisionError::EmptyTemplate { path: agent_json });
        }
        let template_entries = self.matching(&self.template)?;
        self.limit("template", template_entries.len())?;
        for (_, path) in &template_entries {
            refuse_links_and_special_files(path)?;
        }
        for dir in MANAGED_DIRS {
            let dest = self.kiro_home.join(dir);
            if std::fs::symlink_metadata(&dest).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(ProvisionError::Symlink { path: dest });
            }
        }
        let existing = self.matching(&self.kiro_home)?;
        self.limit("destination", existing.len())?;

        let mut report = ProvisionReport {
            kiro_home: self.kiro_home.clone(),
            ..ProvisionReport::default()
        };
        for dir in MANAGED_DIRS {
            let dest = self.kiro_home.join(dir);
            std::fs::create_dir_all(&dest).map_err(io_error("cannot create", &dest))?;
        }
        for (relative, path) in &existing {
            remove_entry(path)?;
            report.deleted.push(relative.clone());
        }
        let home = Root::new(&self.kiro_home).map_err(ProvisionError::Destination)?;
        for (relative, path) in &template_entries {
            self.copy_entry(&home, path, Path::new(relative))?;
            report.copied.push(relative.clone());
        }
        let installed = self.kiro_home.join("agents").join(self.agent.json_file());
        if !installed.is_file() {
            return Err(ProvisionError::PostCheck { path: installed });
        }
        Ok(report)
    }

    fn limit(&self, side: &'static str, count: usize) -> Result<(), ProvisionError> {
        if count > SAFETY_LIMIT {
            return Err(ProvisionError::SafetyLimit {
                side,
                prefix: self.agent.to_string(),
                count,
            });
        }
        Ok(())
    }

    /// The entries of the managed directories under `root` whose names start with the agent
    /// name, as (`dir/name`, path), sorted per directory.
    fn matching(&self, root: &Path) -> Result<Vec<(String, PathBuf)>, ProvisionError> {
        let mut found = Vec::new();
        for dir in MANAGED_DIRS {
            let path = root.join(dir);
            let entries = match std::fs::read_dir(&path) {
                Ok(entries) => entries,
                Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
                Err(error) => return Err(io_error("cannot list", &path)(error)),
            };
            let mut names = Vec::new();
            for entry in entries {
                let entry = entry.map_err(io_error("cannot list", &path))?;
                // Names that are not UTF-8 cannot start with a valid agent name.
                if let Some(name) = entry.file_name().to_str()
                    && self.agent.owns(name)
                {
                    names.push(name.to_owned());
                }
            }
            names.sort();
            found.extend(
                names
                    .into_iter()
                    .map(|name| (format!("{dir}/{name}"), path.join(&name))),
            );
        }
        Ok(found)
    }

    /// Copies a top-level template entry to `relative` below the kiro home.
    fn copy_entry(
        &self,
        home: &Root,
        source: &Path,
        relative: &Path,
    ) -> Result<(), ProvisionError> {
        let meta = std::fs::symlink_metadata(source).map_err(io_error("cannot read", source))?;
        if meta.is_dir() {
            copy_tree(home, source, relative)
        } else if source.extension().is_some_and(|e| e == "json") {
            let text = String::from_utf8(read_file(source)?).map_err(|_| ProvisionError::Io {
                action: "cannot read",
                path: source.to_owned(),
                source: io::Error::new(io::ErrorKind::InvalidData, "not valid UTF-8"),
            })?;
            let kiro_home = self.kiro_home.display().to_string();
            let text = text.replace(KIRO_HOME_PLACEHOLDER, &kiro_home);
            install(home, relative, text.as_bytes(), &meta)
        } else {
            install(home, relative, &read_file(source)?, &meta)
        }
    }
}

/// Fails on the first symbolic link, FIFO, device or socket at or below `path`.
fn refuse_links_and_special_files(path: &Path) -> Result<(), ProvisionError> {
    let meta = std::fs::symlink_metadata(path).map_err(io_error("cannot read", path))?;
    let file_type = meta.file_type();
    if file_type.is_symlink() {
        return Err(ProvisionError::Symlink {
            path: path.to_owned(),
        });
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).map_err(io_error("cannot list", path))? {
            let entry = entry.map_err(io_error("cannot list", path))?;
            refuse_links_and_special_files(&entry.path())?;
        }
    } else if !meta.is_file() {
        return Err(ProvisionError::NotRegular {
            path: path.to_owned(),
            kind: special_kind(&file_type),
        });
    }
    Ok(())
}

fn special_kind(file_type: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() || file_type.is_block_device() {
        "a device"
    } else {
        "not a file"
    }
}

/// A template file's bytes, read without blocking (a FIFO put in place after the check is
/// refused).
fn read_file(source: &Path) -> Result<Vec<u8>, ProvisionError> {
    inside_root::read_regular(source, u64::MAX).map_err(|error| match error {
        InsideRootError::NotRegular { kind, .. } => ProvisionError::NotRegular {
            path: source.to_owned(),
            kind,
        },
        other => ProvisionError::Io {
            action: "cannot read",
            path: source.to_owned(),
            source: io::Error::other(other.to_string()),
        },
    })
}

/// Writes a file at `relative` below the kiro home with the template file's mode.
fn install(
    home: &Root,
    relative: &Path,
    bytes: &[u8],
    source: &std::fs::Metadata,
) -> Result<(), ProvisionError> {
    let target = home
        .resolve(relative)
        .map_err(ProvisionError::Destination)?;
    target
        .write_file(bytes)
        .map_err(ProvisionError::Destination)?;
    let target = target.path();
    std::fs::set_permissions(&target, source.permissions())
        .map_err(io_error("cannot set the mode of", &target))
}

/// Removes a file, a symbolic link (not its target) or a directory tree.
fn remove_entry(path: &Path) -> Result<(), ProvisionError> {
    let meta = std::fs::symlink_metadata(path).map_err(io_error("cannot read", path))?;
    if meta.is_dir() {
        std::fs::remove_dir_all(path).map_err(io_error("cannot delete", path))
    } else {
        std::fs::remove_file(path).map_err(io_error("cannot delete", path))
    }
}

/// Copies the directory `source` to `relative` below the kiro home.
fn copy_tree(home: &Root, source: &Path, relative: &Path) -> Result<(), ProvisionError> {
    let target = home
        .resolve(relative)
        .map_err(ProvisionError::Destination)?
        .path();
    std::fs::create_dir_all(&target).map_err(io_error("cannot create", &target))?;
    for entry in std::fs::read_dir(source).map_err(io_error("cannot list", source))? {
        let entry = entry.map_err(io_error("cannot list", source))?;
        let from = entry.path();
        let to = relative.join(entry.file_name());
        let meta = std::fs::symlink_metadata(&from).map_err(io_error("cannot read", &from))?;
        if meta.file_type().is_symlink() {
            return Err(ProvisionError::Symlink { path: from });
        } else if meta.is_dir() {
            copy_tree(home, &from, &to)?;
        } else {
            install(home, &to, &read_file(&from)?, &meta)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf, Provisioner) {
        let dir = tempfile::tempdir().unwrap();
        let template = dir.path().join("tpl");
        let home = dir.path().join("home/.kiro");
        write(
            &template.join("agents/tg-acp.json"),
            r#"{"resources":["file://{{KIRO_HOME}}/steering/tg-acp-context.md"]}"#,
        );
        write(&template.join("steering/tg-acp-context.md"), "new context");
        write(&template.join("skills/tg-acp-skill/SKILL.md"), "skill");
        write(&template.join("steering/other.md"), "not ours");
        let provisioner =
            Provisioner::new(&template, &home, AgentName::parse("tg-acp").unwrap()).unwrap();
        (dir, template, home, provisioner)
    }

    #[test]
    fn delete_then_copy_within_the_prefix() {
        let (_dir, _template, home, provisioner) = setup();
        write(&home.join("steering/tg-acp-stale.md"), "stale");
        write(&home.join("steering/other.md"), "keep me");
        write(&home.join("agents/TG-ACP.json"), "other case");
        let report = provisioner.provision().unwrap();
        assert_eq!(report.deleted, ["steering/tg-acp-stale.md"]);
        assert_eq!(
            report.copied,
            [
                "agents/tg-acp.json",
                "steering/tg-acp-context.md",
                "skills/tg-acp-skill"
            ]
        );
        assert!(!home.join("steering/tg-acp-stale.md").exists());
        assert_eq!(
            std::fs::read_to_string(home.join("steering/other.md")).unwrap(),
            "keep me"
        );
        assert!(home.join("agents/TG-ACP.json").exists());
        assert!(home.join("skills/tg-acp-skill/SKILL.md").is_file());
        let agent = std::fs::read_to_string(home.join("agents/tg-acp.json")).unwrap();
        assert!(
            agent.contains(&format!("file://{}/steering", home.display())),
            "{agent}"
        );
    }

    #[test]
    fn refuses_more_than_twenty_and_touches_nothing() {
        let (_dir, _template, home, provisioner) = setup();
        for i in 0..21 {
            write(&home.join(format!("skills/tg-acp-{i}")), "x");
        }
        let error = provisioner.provision().unwrap_err();
        assert_eq!(error.rule(), Some("BR-03.3"));
        assert!(home.join("skills/tg-acp-0").exists());
    }

    #[test]
    fn refuses_an_empty_template() {
        let dir = tempfile::tempdir().unwrap();
        let template = dir.path().join("tpl");
        std::fs::create_dir_all(&template).unwrap();
        let provisioner = Provisioner::new(
            &template,
            &dir.path().join("home"),
            AgentName::parse("tg-acp").unwrap(),
        )
        .unwrap();
        assert_eq!(provisioner.provision().unwrap_err().rule(), Some("BR-03.4"));
        assert!(!dir.path().join("home").exists());
    }

    #[test]
    fn refuses_symlinks_in_the_template() {
        let (dir, template, home, provisioner) = setup();
        write(&dir.path().join("secret"), "outside");
        std::os::unix::fs::symlink(
            dir.path().join("secret"),
            template.join("skills/tg-acp-skill/leak"),
        )
        .unwrap();
        assert!(matches!(
            provisioner.provision(),
            Err(ProvisionError::Symlink { .. })
        ));
        assert!(!home.exists());
    }

    #[test]
    fn copied_files_keep_their_mode() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, template, home, provisioner) = setup();
        let script = template.join("skills/tg-acp-skill/run.sh");
        write(&script, "#!/bin/sh\n");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o750)).unwrap();
        provisioner.provision().unwrap();
        let copied = std::fs::metadata(home.join("skills/tg-acp-skill/run.sh")).unwrap();
        assert_eq!(copied.permissions().mode() & 0o777, 0o750);
    }

    #[test]
    fn deletes_a_destination_link_not_its_target() {
        let (dir, _template, home, provisioner) = setup();
        write(&dir.path().join("outside/keep.md"), "keep");
        std::fs::create_dir_all(home.join("skills")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside"), home.join("skills/tg-acp-link"))
            .unwrap();
        provisioner.provision().unwrap();
        assert!(dir.path().join("outside/keep.md").is_file());
        assert!(std::fs::symlink_metadata(home.join("skills/tg-acp-link")).is_err());
    }
}
