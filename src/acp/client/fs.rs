//! The client's file system methods: `fs/read_text_file` and `fs/write_text_file`, confined to
//! allowed root directories.
//!
//! Rules (ACP, and the decisions of the conformance errata):
//! - `path` must be absolute and start with one of the roots; below the root it is resolved by
//!   [`storage::inside_root`](crate::storage::inside_root): `..` past the root and a symbolic
//!   link that leaves it (dangling or not) are `-32602`, so nothing outside is read or created.
//! - `line` is 1-based (`0` is `-32602`) and `limit` counts lines; a `line` past the end gives
//!   empty content. Line terminators are kept as they are in the file.
//! - A read answers at most [`MAX_READ_BYTES`] (the selected lines; lines before `line` are read
//!   through, not kept), more is `-32603` asking for fewer lines.
//! - Reading a missing file is `-32002`; a file that cannot be read (a directory, a FIFO or
//!   device, no permission, not UTF-8) is `-32603`. A FIFO is refused without opening it
//!   blocking.
//! - Writing creates a missing file in an existing directory; a write that fails (a missing
//!   directory, a path that is a directory, a FIFO or device, no permission) is `-32603`. A
//!   final link is never followed by the write.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use crate::acp::{ReadTextFileRequest, ReadTextFileResponse, WriteTextFileRequest};
use crate::jsonrpc::DEFAULT_MAX_LINE_BYTES;
use crate::jsonrpc::RpcError;
use crate::storage::inside_root::{InsideRootError, Resolved, Root};

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
                .open_file()
                .and_then(|file| {
                    read_lines(file, request.line, request.limit, MAX_READ_BYTES).map_err(
                        |source| InsideRootError::Io {
                            path: request.path.clone().into(),
                            source,
                        },
                    )
                })
                .map_err(|error| read_failure(&request.path, &error))?;
            let Some(bytes) = bytes else {
                return Err(RpcError::internal_error(format!(
                    "the selected lines of {} are larger than {MAX_READ_BYTES} bytes; read fewer \
                     lines at a time",
                    request.path
                )));
            };
            String::from_utf8(bytes).map_err(|_| {
                RpcError::internal_error(format!("{} is not valid utf-8 text", request.path))
            })
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
                .write_file(request.content.as_bytes())
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

/// The most bytes one read answers with: more could not be sent in one message of the default
/// limit anyway. Lines skipped on the way to `line` are not kept, so a part of a larger file can
/// be read.
pub const MAX_READ_BYTES: u64 = DEFAULT_MAX_LINE_BYTES as u64;

/// The lines `line..line+limit` (1-based) of `file`, terminators kept; `None` when they come to
/// more than `max_bytes`. Skipped lines are read through, never held.
fn read_lines(
    file: File,
    line: Option<u32>,
    limit: Option<u32>,
    max_bytes: u64,
) -> io::Result<Option<Vec<u8>>> {
    let mut reader = BufReader::new(file);
    for _ in 1..line.unwrap_or(1) {
        if !skip_line(&mut reader)? {
            return Ok(Some(Vec::new()));
        }
    }
    let mut selected = Vec::new();
    let mut lines_left = limit.map_or(u64::MAX, u64::from);
    while lines_left > 0 {
        let budget = max_bytes + 1 - selected.len() as u64;
        let read = (&mut reader)
            .take(budget)
            .read_until(b'\n', &mut selected)?;
        if selected.len() as u64 > max_bytes {
            return Ok(None);
        }
        if read == 0 {
            break;
        }
        lines_left -= 1;
    }
    Ok(Some(selected))
}

/// Reads past the next line terminator without keeping anything; `false` at the end of the file.
fn skip_line(reader: &mut impl BufRead) -> io::Result<bool> {
    loop {
        let buffered = reader.fill_buf()?;
        if buffered.is_empty() {
            return Ok(false);
        }
        match buffered.iter().position(|byte| *byte == b'\n') {
            Some(end) => {
                reader.consume(end + 1);
                return Ok(true);
            }
            None => {
                let length = buffered.len();
                reader.consume(length);
            }
        }
    }
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

    /// `read_lines` over a real file holding `text`, as text.
    fn lines_of(text: &str, line: Option<u32>, limit: Option<u32>, max: u64) -> Option<String> {
        let mut file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
        std::io::Seek::rewind(&mut file).unwrap();
        read_lines(file, line, limit, max)
            .unwrap()
            .map(|bytes| String::from_utf8(bytes).unwrap())
    }

    #[test]
    fn lines_are_one_based_and_keep_terminators() {
        let text = "one\ntwo\r\nthree\nfour\nfive";
        let select = |line, limit| lines_of(text, line, limit, 1024).unwrap();
        assert_eq!(select(None, None), text);
        assert_eq!(select(Some(2), Some(2)), "two\r\nthree\n");
        assert_eq!(select(Some(5), None), "five");
        assert_eq!(select(Some(9), Some(1)), "");
        assert_eq!(select(None, Some(1)), "one\n");
        assert_eq!(select(Some(1), Some(0)), "");
    }

    #[test]
    fn a_read_is_bounded_by_what_it_selects_not_by_what_it_skips() {
        let long = format!("{}\nshort\n", "x".repeat(100));
        assert_eq!(
            lines_of(&long, Some(2), Some(1), 10).as_deref(),
            Some("short\n")
        );
        assert_eq!(lines_of(&long, None, None, 10), None);
        assert_eq!(lines_of(&long, Some(1), Some(1), 10), None);
        assert_eq!(
            lines_of("0123456789", None, None, 10).as_deref(),
            Some("0123456789")
        );
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
