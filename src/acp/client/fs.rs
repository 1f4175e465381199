//! The client's file system methods: `fs/read_text_file` and `fs/write_text_file`, confined to
//! allowed root directories.
//!
//! Rules (ACP, and the decisions of the conformance errata):
//! - `path` must be absolute and start with one of the roots; below the root it is resolved by
//!   [`storage::inside_root`](crate::storage::inside_root): `..` past the root and a symbolic
//!   link that leaves it (dangling or not) are `-32602`, so nothing outside is read or created.
//! - `line` is 1-based (`0` is `-32602`) and `limit` counts lines; a `line` past the end gives
//!   empty content. Line terminators are kept as they are in the file.
//! - Reading a missing file is `-32002`; a file that cannot be read (a directory, a FIFO or
//!   device, no permission, not UTF-8) is `-32603`. A FIFO is refused without opening it
//!   blocking.
//! - Writing creates a missing file in an existing directory; a write that fails (a missing
//!   directory, a path that is a directory, a FIFO or device, no permission) is `-32603`. A
//!   final link is never followed by the write.

use std::path::Path;

use crate::acp::{ReadTextFileRequest, ReadTextFileResponse, WriteTextFileRequest};
use crate::jsonrpc::RpcError;
use crate::storage::inside_root::{InsideRootError, Resolved, Root, read_regular, write_regular};

/// Where the agent may read and write, and which of the two it may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsConfig {
    /// Directories the agent may touch, with everything below them. No roots: nothing allowed.
    pub roots: Vec<std::path::PathBuf>,
    /// Advertise and serve `fs/read_text_file`.
    pub read: bool,
    /// Advertise and serve `fs/write_text_file`.
    pub write: bool,
}

impl FsConfig {
    /// Reading and writing below `roots`.
    pub fn read_write(roots: impl IntoIterator<Item = impl Into<std::path::PathBuf>>) -> Self {
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
    roots: std::sync::Arc<[Root]>,
}

impl FsService {
    /// Resolves the roots once (a root that is not an existing directory matches nothing).
    pub(crate) fn new(config: &FsConfig) -> Self {
        let roots = config
            .roots
            .iter()
            .filter_map(|root| Root::new(root).ok())
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
        let service = self.clone();
        let text = blocking(move || {
            let resolved = service.resolve(&request.path)?;
            let bytes = resolved
                .existing_file()
                .and_then(|path| read_regular(&path, u64::MAX))
                .map_err(|error| read_failure(&request.path, &error))?;
            let text = String::from_utf8(bytes).map_err(|_| {
                RpcError::internal_error(format!("{} is not valid utf-8 text", request.path))
            })?;
            Ok(select_lines(&text, request.line, request.limit))
        })
        .await?;
        Ok(ReadTextFileResponse {
            content: text,
            extra: Default::default(),
        })
    }

    /// `fs/write_text_file`.
    pub(crate) async fn write(&self, request: WriteTextFileRequest) -> Result<(), RpcError> {
        let service = self.clone();
        blocking(move || {
            let resolved = service.resolve(&request.path)?;
            resolved
                .file_to_write()
                .and_then(|path| write_regular(&path, request.content.as_bytes()))
                .map_err(|error| RpcError::internal_error(error.to_string()))
        })
        .await
    }

    /// The path the request names, if it is absolute and resolves inside a root.
    fn resolve(&self, raw: &str) -> Result<Resolved, RpcError> {
        let path = Path::new(raw);
        if raw.is_empty() || !path.is_absolute() {
            return Err(RpcError::invalid_params(format!(
                "path must be absolute, got {raw:?}"
            )));
        }
        let mut refusal = None;
        for root in self.roots.iter() {
            match root.resolve_absolute(path) {
                Ok(resolved) => return Ok(resolved),
                Err(InsideRootError::Outside { .. }) => {}
                Err(error) => {
                    refusal.get_or_insert(error);
                }
            }
        }
        Err(match refusal {
            Some(error) if error.is_escape() => RpcError::invalid_params(error.to_string()),
            Some(error) => RpcError::internal_error(error.to_string()),
            None => RpcError::invalid_params(format!(
                "path {raw} is outside the directories this client allows"
            )),
        })
    }
}

/// Runs file-system work off the runtime's threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, RpcError> + Send + 'static,
) -> Result<T, RpcError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| RpcError::internal_error(format!("file access failed: {error}")))?
}

fn read_failure(raw: &str, error: &InsideRootError) -> RpcError {
    match error {
        InsideRootError::NotFound { .. } => {
            RpcError::resource_not_found(format!("no such file: {raw}"))
        }
        error => RpcError::internal_error(error.to_string()),
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
