//! The client's file system methods: `fs/read_text_file` and `fs/write_text_file`, confined to
//! allowed root directories.
//!
//! Rules (ACP, and the decisions of the conformance errata):
//! - `path` must be absolute and, once `.` and `..` are resolved and symbolic links of its
//!   existing part followed, inside one of the roots; otherwise `-32602`.
//! - `line` is 1-based (`0` is `-32602`) and `limit` counts lines; a `line` past the end gives
//!   empty content. Line terminators are kept as they are in the file.
//! - Reading a missing file is `-32002`; a file that cannot be read (a directory, no permission,
//!   not UTF-8) is `-32603`.
//! - Writing creates a missing file in an existing directory; a write that fails (a missing
//!   directory, a path that is a directory, no permission) is `-32603`.

use std::io;
use std::path::{Component, Path, PathBuf};

use crate::acp::{ReadTextFileRequest, ReadTextFileResponse, WriteTextFileRequest};
use crate::jsonrpc::RpcError;

/// Where the agent may read and write, and which of the two it may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsConfig {
    /// Directories the agent may touch, with everything below them. No roots: nothing allowed.
    pub roots: Vec<PathBuf>,
    /// Advertise and serve `fs/read_text_file`.
    pub read: bool,
    /// Advertise and serve `fs/write_text_file`.
    pub write: bool,
}

impl FsConfig {
    /// Reading and writing below `roots`.
    pub fn read_write(roots: impl IntoIterator<Item = impl Into<PathBuf>>) -> Self {
        Self {
            roots: roots.into_iter().map(Into::into).collect(),
            read: true,
            write: true,
        }
    }
}

/// Serves the file system methods for one configuration.
#[derive(Debug, Clone)]
pub(crate) struct FsService {
    roots: Vec<PathBuf>,
}

impl FsService {
    /// Resolves the roots once (a root that does not exist is kept as given and matches
    /// nothing that exists).
    pub(crate) fn new(config: &FsConfig) -> Self {
        let roots = config
            .roots
            .iter()
            .map(|root| root.canonicalize().unwrap_or_else(|_| normalize(root)))
            .collect();
        Self { roots }
    }

    /// `fs/read_text_file`.
    pub(crate) async fn read(
        &self,
        request: ReadTextFileRequest,
    ) -> Result<ReadTextFileResponse, RpcError> {
        if request.line == Some(0) {
            return Err(RpcError::invalid_params("line is 1-based; 0 is not a line"));
        }
        let path = self.resolve(&request.path)?;
        let bytes = tokio::fs::read(&path).await.map_err(|error| {
            if error.kind() == io::ErrorKind::NotFound {
                RpcError::resource_not_found(format!("no such file: {}", request.path))
            } else {
                RpcError::internal_error(format!("cannot read {}: {error}", request.path))
            }
        })?;
        let text = String::from_utf8(bytes).map_err(|_| {
            RpcError::internal_error(format!("{} is not valid utf-8 text", request.path))
        })?;
        let content = select_lines(&text, request.line, request.limit);
        Ok(ReadTextFileResponse {
            content,
            extra: Default::default(),
        })
    }

    /// `fs/write_text_file`.
    pub(crate) async fn write(&self, request: WriteTextFileRequest) -> Result<(), RpcError> {
        let path = self.resolve(&request.path)?;
        tokio::fs::write(&path, request.content.as_bytes())
            .await
            .map_err(|error| {
                RpcError::internal_error(format!("cannot write {}: {error}", request.path))
            })
    }

    /// The path the request names, if it is absolute and inside a root.
    fn resolve(&self, raw: &str) -> Result<PathBuf, RpcError> {
        let path = Path::new(raw);
        if raw.is_empty() || !path.is_absolute() {
            return Err(RpcError::invalid_params(format!(
                "path must be absolute, got {raw:?}"
            )));
        }
        let resolved = resolve_existing(&normalize(path));
        if self.roots.iter().any(|root| resolved.starts_with(root)) {
            Ok(resolved)
        } else {
            Err(RpcError::invalid_params(format!(
                "path {raw} is outside the directories this client allows"
            )))
        }
    }
}

/// Resolves `.` and `..` without touching the file system (`..` at the root stays at the root).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Follows symbolic links in the longest existing ancestor of `path` and appends the rest.
fn resolve_existing(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(canonical) = existing.canonicalize() {
            let mut resolved = canonical;
            for name in rest.iter().rev() {
                resolved.push(name);
            }
            return resolved;
        }
        match existing.file_name() {
            Some(name) => {
                rest.push(name.to_os_string());
                existing.pop();
            }
            None => return path.to_path_buf(),
        }
    }
}

/// The lines `line..line+limit` (1-based) of `text`, terminators kept.
fn select_lines(text: &str, line: Option<u32>, limit: Option<u32>) -> String {
    if line.is_none() && limit.is_none() {
        return text.to_owned();
    }
    let skip = line.map_or(0, |line| line.saturating_sub(1) as usize);
    let take = limit.map_or(usize::MAX, |limit| limit as usize);
    text.split_inclusive('\n').skip(skip).take(take).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::jsonrpc::ErrorCode;

    fn read_request(path: &Path, line: Option<u32>, limit: Option<u32>) -> ReadTextFileRequest {
        let mut params = json!({"sessionId": "s", "path": path.to_str().unwrap()});
        if let Some(line) = line {
            params["line"] = json!(line);
        }
        if let Some(limit) = limit {
            params["limit"] = json!(limit);
        }
        serde_json::from_value(params).unwrap()
    }

    fn write_request(path: &str, content: &str) -> WriteTextFileRequest {
        serde_json::from_value(json!({"sessionId": "s", "path": path, "content": content})).unwrap()
    }

    #[test]
    fn lines_are_one_based_and_keep_terminators() {
        let text = "one\ntwo\r\nthree\nfour\nfive";
        assert_eq!(select_lines(text, None, None), text);
        assert_eq!(select_lines(text, Some(2), Some(2)), "two\r\nthree\n");
        assert_eq!(select_lines(text, Some(5), None), "five");
        assert_eq!(select_lines(text, Some(9), Some(1)), "");
        assert_eq!(select_lines(text, None, Some(1)), "one\n");
        assert_eq!(select_lines(text, Some(1), Some(0)), "");
    }

    #[test]
    fn normalize_resolves_dots() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/../x")), PathBuf::from("/x"));
    }

    #[tokio::test]
    async fn read_and_write_inside_the_roots() {
        let dir = tempfile::tempdir().unwrap();
        let service = FsService::new(&FsConfig::read_write([dir.path()]));
        let file = dir.path().join("five.txt");
        std::fs::write(&file, "1\n2\n3\n4\n5\n").unwrap();
        let whole = service.read(read_request(&file, None, None)).await.unwrap();
        assert_eq!(whole.content, "1\n2\n3\n4\n5\n");
        let part = service
            .read(read_request(&file, Some(2), Some(2)))
            .await
            .unwrap();
        assert_eq!(part.content, "2\n3\n");

        let new_file = dir.path().join("new.txt");
        service
            .write(write_request(new_file.to_str().unwrap(), "created"))
            .await
            .unwrap();
        assert_eq!(std::fs::read_to_string(&new_file).unwrap(), "created");
    }

    #[tokio::test]
    async fn bad_paths_and_failures_get_their_codes() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let service = FsService::new(&FsConfig::read_write([dir.path()]));
        let code = |result: Result<ReadTextFileResponse, RpcError>| result.unwrap_err().code;

        let relative = read_request(Path::new("five.txt"), None, None);
        assert_eq!(
            code(service.read(relative).await),
            ErrorCode::INVALID_PARAMS
        );
        let zero = read_request(&dir.path().join("x"), Some(0), None);
        assert_eq!(code(service.read(zero).await), ErrorCode::INVALID_PARAMS);
        let missing = read_request(&dir.path().join("missing"), None, None);
        assert_eq!(
            code(service.read(missing).await),
            ErrorCode::RESOURCE_NOT_FOUND
        );
        let directory = read_request(dir.path(), None, None);
        assert_eq!(
            code(service.read(directory).await),
            ErrorCode::INTERNAL_ERROR
        );
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let escape = read_request(
            &dir.path()
                .join("../")
                .join(outside.path().file_name().unwrap())
                .join("secret"),
            None,
            None,
        );
        assert_eq!(code(service.read(escape).await), ErrorCode::INVALID_PARAMS);
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        let through_link = read_request(&dir.path().join("link/secret"), None, None);
        assert_eq!(
            code(service.read(through_link).await),
            ErrorCode::INVALID_PARAMS
        );

        let write_code = |result: Result<(), RpcError>| result.unwrap_err().code;
        let no_dir = dir.path().join("no/such/dir/file.txt");
        assert_eq!(
            write_code(
                service
                    .write(write_request(no_dir.to_str().unwrap(), "x"))
                    .await
            ),
            ErrorCode::INTERNAL_ERROR
        );
        assert_eq!(
            write_code(
                service
                    .write(write_request(dir.path().to_str().unwrap(), "x"))
                    .await
            ),
            ErrorCode::INTERNAL_ERROR
        );
        assert_eq!(
            write_code(service.write(write_request("relative.txt", "x")).await),
            ErrorCode::INVALID_PARAMS
        );
        let outside_file = outside.path().join("new.txt");
        assert_eq!(
            write_code(
                service
                    .write(write_request(outside_file.to_str().unwrap(), "x"))
                    .await
            ),
            ErrorCode::INVALID_PARAMS
        );
        assert!(!outside_file.exists());
    }
}
