//! Local paths out of a published matrix: the build directory, the working directory, the home
//! directory and the temp directory of the machine that made it are written as placeholders
//! (`{target_dir}`, `{cwd}`, `{home}`, `{tmp}`; a generated temp dir as a whole, `{temp_dir}`),
//! wherever a target, a profile or the harness wrote them.

use std::path::{Path, PathBuf};

/// The placeholder of one generated temp directory (a scenario's, discovery's).
pub const TEMP_DIR: &str = "{temp_dir}";

/// The placeholder of the temp root itself, for paths under it that are not generated.
const TMP: &str = "{tmp}";

/// Which local directories are replaced, and by what.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// `(directory, placeholder)`, longest directory first.
    rules: Vec<(String, &'static str)>,
}

impl Redactor {
    /// The directories of this machine: the build directory (the parent of this binary's
    /// directory), the working directory, HOME and the temp root.
    pub fn local() -> Self {
        let build = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().and_then(Path::parent).map(Path::to_owned));
        let cwd = std::env::current_dir().ok();
        let home = std::env::var_os("HOME").map(PathBuf::from);
        Self::new(build, cwd, home, Some(std::env::temp_dir()))
    }

    /// Replaces `build`, `cwd`, `home` and `tmp`, each also under its canonical name.
    pub fn new(
        build: Option<PathBuf>,
        cwd: Option<PathBuf>,
        home: Option<PathBuf>,
        tmp: Option<PathBuf>,
    ) -> Self {
        let mut rules: Vec<(String, &'static str)> = Vec::new();
        for (dir, placeholder) in [
            (build, "{target_dir}"),
            (cwd, "{cwd}"),
            (home, "{home}"),
            (tmp, TMP),
        ] {
            let Some(dir) = dir else { continue };
            let canonical = std::fs::canonicalize(&dir).ok();
            for dir in [Some(dir), canonical].into_iter().flatten() {
                let text = dir.to_string_lossy().trim_end_matches('/').to_owned();
                // The root, or a relative name, would replace far too much.
                if text.len() > 1
                    && text.starts_with('/')
                    && !rules.iter().any(|(known, _)| *known == text)
                {
                    rules.push((text, placeholder));
                }
            }
        }
        // Longest first: the build directory inside the working directory is named as such.
        rules.sort_by_key(|(dir, _)| std::cmp::Reverse(dir.len()));
        Self { rules }
    }

    /// `text` with every local directory (at a path boundary) written as its placeholder.
    pub fn apply(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (dir, placeholder) in &self.rules {
            out = replace_dir(&out, dir, placeholder);
        }
        generated_temp_dirs(&out)
    }
}

/// Every `dir` in `text` that ends at a path boundary (`/`, the end, or a character no path
/// name here has) replaced by `placeholder`.
fn replace_dir(text: &str, dir: &str, placeholder: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(dir) {
        let after = &rest[at + dir.len()..];
        let boundary = after.chars().next().is_none_or(|c| !is_name_char(c));
        // A match inside a longer path (`/x/tmp` for `/tmp`) is not this directory.
        let before = &rest[..at];
        let starts = before.ends_with("://")
            || before
                .chars()
                .next_back()
                .is_none_or(|c| !is_name_char(c) && c != '/');
        out.push_str(&rest[..at]);
        if boundary && starts {
            out.push_str(placeholder);
        } else {
            out.push_str(dir);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// A character of a file name as the runs write them (a path ends before anything else).
fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '+' | '@' | '~' | '%')
}

/// `{tmp}/NAME` written `{temp_dir}` when NAME is a generated temp directory (`.tmpXXXX`,
/// `tmpXXXX`, `ski-...`): what is under it differs from run to run and says nothing.
fn generated_temp_dirs(text: &str) -> String {
    let prefix = format!("{TMP}/");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(&prefix) {
        out.push_str(&rest[..at]);
        let after = &rest[at + prefix.len()..];
        let end = after
            .find(|c: char| !is_name_char(c))
            .unwrap_or(after.len());
        let name = &after[..end];
        if name.starts_with(".tmp") || name.starts_with("tmp") || name.starts_with("ski-") {
            out.push_str(TEMP_DIR);
            rest = &after[end..];
        } else {
            out.push_str(&prefix);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::Redactor;

    #[test]
    fn local_directories_become_placeholders_at_path_boundaries_only() {
        let redactor = Redactor::new(
            Some(PathBuf::from("/srv/repo/target")),
            Some(PathBuf::from("/srv/repo")),
            Some(PathBuf::from("/home/me")),
            Some(PathBuf::from("/tmp")),
        );
        assert_eq!(
            redactor.apply("node /srv/repo/target/peers/echo.mjs in /srv/repo/conformance"),
            "node {target_dir}/peers/echo.mjs in {cwd}/conformance"
        );
        assert_eq!(
            redactor.apply("at file:///tmp/agents/q/cli.js:1:2"),
            "at file://{tmp}/agents/q/cli.js:1:2"
        );
        assert_eq!(
            redactor.apply("HOME=/home/me/.cache; /home/meg stays; /x/tmp/y stays"),
            "HOME={home}/.cache; /home/meg stays; /x/tmp/y stays"
        );
        assert_eq!(
            redactor.apply(
                "cwd \"/tmp/.tmpAb12Cd/home\", /tmp/ski-conformance-discovery-x1, /tmp/agents/a"
            ),
            "cwd \"{temp_dir}/home\", {temp_dir}, {tmp}/agents/a"
        );
    }
}
