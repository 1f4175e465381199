//! Paths inside a root directory, resolved one way wherever a name from outside (an agent's
//! path, an approved file, a template entry, a summary reference) meets a directory on disk.
//!
//! [`Root::resolve`] walks the path one component at a time from the canonical root, with
//! `lstat` on each:
//! - a symbolic link is followed only while its target stays inside the root; a link that
//!   leaves it (an absolute target elsewhere, or `..` past the root) is refused, dangling or
//!   not, so a write can never create a file outside through a link whose target does not
//!   exist yet;
//! - `..` that climbs out of the root is refused; `..` that stays inside is allowed;
//! - more than [`MAX_LINKS`] links on one path are refused (a loop);
//! - what does not exist yet is kept as names below the deepest existing directory, so a write
//!   can create it there.
//!
//! A [`Resolved`] path then says what the caller may do with it: read an existing regular file
//! ([`Resolved::existing_file`]) or write one that is regular or not there yet
//! ([`Resolved::file_to_write`]), and [`Resolved::open_file`], [`Resolved::read_file`] and
//! [`Resolved::write_file`] do it: their open refuses a link on any component of the resolved
//! path (`openat2` with `RESOLVE_NO_SYMLINKS`), so a directory swapped for a link between the
//! resolution and the open is refused too, never blocks on a FIFO (`O_NONBLOCK`), and checks the
//! opened file is regular before reading or changing a byte. [`open_regular_for_read`] and
//! [`read_regular`] do the same for a file that was not resolved in a root (one the operator
//! named), refusing a final link only.

use std::ffi::OsString;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, OFlag, OpenHow, ResolveFlag, openat2};
use nix::sys::stat::Mode;

/// The most symbolic links followed while resolving one path (Linux's own limit).
pub const MAX_LINKS: usize = 40;

/// Why a path was refused or could not be used; every message names the path as it was given.
#[derive(Debug, thiserror::Error)]
pub enum InsideRootError {
    /// The root itself is not a usable directory.
    #[error("the root {root} is not usable: {source}")]
    Root {
        /// The root as given.
        root: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// An absolute path where a relative one is required.
    #[error("{path} is absolute; give a path relative to the root")]
    Absolute {
        /// The path as given.
        path: PathBuf,
    },
    /// An absolute path that does not start with the root.
    #[error("{path} is outside the root {root}")]
    Outside {
        /// The path as given.
        path: PathBuf,
        /// The root.
        root: PathBuf,
    },
    /// `..` past the root.
    #[error("{path} climbs out of the root with '..'")]
    ClimbsOut {
        /// The path as given.
        path: PathBuf,
    },
    /// A symbolic link whose target is outside the root (it may not exist yet).
    #[error("{path} leaves the root through the link {link} -> {target}")]
    LeavesRoot {
        /// The path as given.
        path: PathBuf,
        /// The link, relative to the root.
        link: PathBuf,
        /// What the link points to, as stored in it.
        target: PathBuf,
    },
    /// Too many links (a loop).
    #[error("{path} goes through more than {MAX_LINKS} symbolic links")]
    TooManyLinks {
        /// The path as given.
        path: PathBuf,
    },
    /// A component used as a directory is something else.
    #[error("{path}: {at} is not a directory")]
    NotADirectory {
        /// The path as given.
        path: PathBuf,
        /// The component, relative to the root.
        at: PathBuf,
    },
    /// Nothing at the path (or at one of its directories).
    #[error("{path} does not exist")]
    NotFound {
        /// The path as given.
        path: PathBuf,
    },
    /// A write whose directory does not exist.
    #[error("{path}: the directory {dir} does not exist")]
    MissingDirectory {
        /// The path as given.
        path: PathBuf,
        /// The first missing directory, relative to the root.
        dir: PathBuf,
    },
    /// Something other than a regular file where one is required.
    #[error("{path} is {kind}, not a regular file")]
    NotRegular {
        /// The path as given.
        path: PathBuf,
        /// What it is: `a directory`, `a FIFO`, ...
        kind: &'static str,
    },
    /// A file larger than the caller reads.
    #[error("{path} is larger than {limit} bytes")]
    TooLarge {
        /// The path as given.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
    },
    /// A file-system call failed.
    #[error("{path}: {source}")]
    Io {
        /// The path as given.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
}

impl InsideRootError {
    /// Whether the path was refused for where it leads (absolute, outside, `..`, a link out,
    /// a link loop) rather than for what is or is not there.
    pub fn is_escape(&self) -> bool {
        matches!(
            self,
            Self::Absolute { .. }
                | Self::Outside { .. }
                | Self::ClimbsOut { .. }
                | Self::LeavesRoot { .. }
                | Self::TooManyLinks { .. }
        )
    }
}

/// A directory that paths are resolved inside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// The root as given, made absolute (an absolute path may use this spelling).
    given: PathBuf,
    /// The root with every link resolved.
    canonical: PathBuf,
}

impl Root {
    /// The root at `dir`, which must be an existing directory.
    pub fn new(dir: &Path) -> Result<Root, InsideRootError> {
        let failed = |source| InsideRootError::Root {
            root: dir.to_owned(),
            source,
        };
        let given = std::path::absolute(dir).map_err(failed)?;
        let canonical = dir.canonicalize().map_err(failed)?;
        if !canonical.is_dir() {
            return Err(failed(io::Error::new(
                io::ErrorKind::NotADirectory,
                "not a directory",
            )));
        }
        Ok(Root { given, canonical })
    }

    /// The root with every link resolved.
    pub fn path(&self) -> &Path {
        &self.canonical
    }

    /// Resolves `relative` below the root; absolute paths are refused.
    pub fn resolve(&self, relative: &Path) -> Result<Resolved, InsideRootError> {
        if relative.has_root() {
            return Err(InsideRootError::Absolute {
                path: relative.to_owned(),
            });
        }
        self.walk(relative, relative)
    }

    /// Resolves an absolute `path` that names the root (by the spelling it was given or its
    /// canonical one) and then something below it.
    pub fn resolve_absolute(&self, path: &Path) -> Result<Resolved, InsideRootError> {
        match self.below(path) {
            Some(rest) => self.walk(path, rest),
            None => Err(InsideRootError::Outside {
                path: path.to_owned(),
                root: self.canonical.clone(),
            }),
        }
    }

    /// What follows the root in an absolute path, if it starts with the root.
    fn below<'a>(&self, path: &'a Path) -> Option<&'a Path> {
        if !path.has_root() {
            return None;
        }
        path.strip_prefix(&self.canonical)
            .or_else(|_| path.strip_prefix(&self.given))
            .ok()
    }

    fn walk(&self, requested: &Path, rest: &Path) -> Result<Resolved, InsideRootError> {
        let path = || requested.to_owned();
        let mut current = self.canonical.clone();
        let mut kind = EntryKind::Directory;
        let mut missing: Vec<OsString> = Vec::new();
        let mut pending = Vec::new();
        push_steps(&mut pending, rest, None);
        let mut links = 0;
        while let Some(step) = pending.pop() {
            match step.part {
                Part::Parent => {
                    if !missing.is_empty() {
                        return Err(InsideRootError::NotFound { path: path() });
                    }
                    if current == self.canonical {
                        return Err(match step.via {
                            Some(via) => InsideRootError::LeavesRoot {
                                path: path(),
                                link: via.link.clone(),
                                target: via.target.clone(),
                            },
                            None => InsideRootError::ClimbsOut { path: path() },
                        });
                    }
                    current.pop();
                    kind = EntryKind::Directory;
                }
                Part::Name(name) => {
                    if !missing.is_empty() {
                        missing.push(name);
                        continue;
                    }
                    if kind != EntryKind::Directory {
                        return Err(InsideRootError::NotADirectory {
                            path: path(),
                            at: self.relative(&current),
                        });
                    }
                    let candidate = current.join(&name);
                    let meta = match std::fs::symlink_metadata(&candidate) {
                        Ok(meta) => meta,
                        Err(error) if error.kind() == io::ErrorKind::NotFound => {
                            missing.push(name);
                            continue;
                        }
                        Err(source) => {
                            return Err(InsideRootError::Io {
                                path: path(),
                                source,
                            });
                        }
                    };
                    if !meta.file_type().is_symlink() {
                        current = candidate;
                        kind = EntryKind::of(&meta);
                        continue;
                    }
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(InsideRootError::TooManyLinks { path: path() });
                    }
                    let target =
                        std::fs::read_link(&candidate).map_err(|source| InsideRootError::Io {
                            path: path(),
                            source,
                        })?;
                    let via = Rc::new(Via {
                        link: self.relative(&candidate),
                        target: target.clone(),
                    });
                    if target.has_root() {
                        let Some(inside) = self.below(&target) else {
                            return Err(InsideRootError::LeavesRoot {
                                path: path(),
                                link: via.link.clone(),
                                target,
                            });
                        };
                        current = self.canonical.clone();
                        kind = EntryKind::Directory;
                        push_steps(&mut pending, inside, Some(via));
                    } else {
                        push_steps(&mut pending, &target, Some(via));
                    }
                }
            }
        }
        Ok(Resolved {
            requested: requested.to_owned(),
            root: self.canonical.clone(),
            existing: current,
            kind,
            missing,
        })
    }

    fn relative(&self, path: &Path) -> PathBuf {
        path.strip_prefix(&self.canonical)
            .map_or_else(|_| path.to_owned(), Path::to_owned)
    }
}

/// One component still to walk, and the link it came from.
struct Step {
    part: Part,
    via: Option<Rc<Via>>,
}

enum Part {
    Parent,
    Name(OsString),
}

struct Via {
    link: PathBuf,
    target: PathBuf,
}

/// Pushes the components of `path` so that the first is popped first.
fn push_steps(pending: &mut Vec<Step>, path: &Path, via: Option<Rc<Via>>) {
    let parts: Vec<Part> = path
        .components()
        .filter_map(|component| match component {
            Component::ParentDir => Some(Part::Parent),
            Component::Normal(name) => Some(Part::Name(name.to_owned())),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    pending.extend(parts.into_iter().rev().map(|part| Step {
        part,
        via: via.clone(),
    }));
}

/// What an existing entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    RegularFile,
    /// A directory.
    Directory,
    /// Anything else, described (`a FIFO`, `a socket`, ...).
    Other(&'static str),
}

impl EntryKind {
    fn of(meta: &Metadata) -> EntryKind {
        let file_type = meta.file_type();
        if file_type.is_file() {
            EntryKind::RegularFile
        } else if file_type.is_dir() {
            EntryKind::Directory
        } else {
            EntryKind::Other(if file_type.is_fifo() {
                "a FIFO"
            } else if file_type.is_socket() {
                "a socket"
            } else if file_type.is_char_device() {
                "a character device"
            } else if file_type.is_block_device() {
                "a block device"
            } else if file_type.is_symlink() {
                "a symbolic link"
            } else {
                "not a file"
            })
        }
    }

    fn describe(self) -> &'static str {
        match self {
            EntryKind::RegularFile => "a regular file",
            EntryKind::Directory => "a directory",
            EntryKind::Other(kind) => kind,
        }
    }
}

/// A path resolved inside a root: the deepest entry that exists, and the names below it that
/// do not exist yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    requested: PathBuf,
    root: PathBuf,
    existing: PathBuf,
    kind: EntryKind,
    missing: Vec<OsString>,
}

impl Resolved {
    /// The resolved path: no links in its existing part, inside the root.
    pub fn path(&self) -> PathBuf {
        let mut path = self.existing.clone();
        path.extend(&self.missing);
        path
    }

    /// What is at the path, or `None` when it does not exist yet.
    pub fn kind(&self) -> Option<EntryKind> {
        self.missing.is_empty().then_some(self.kind)
    }

    /// The path of an existing regular file, to read.
    pub fn existing_file(&self) -> Result<PathBuf, InsideRootError> {
        match self.kind() {
            None => Err(InsideRootError::NotFound {
                path: self.requested.clone(),
            }),
            Some(EntryKind::RegularFile) => Ok(self.existing.clone()),
            Some(kind) => Err(self.not_regular(kind)),
        }
    }

    /// The path of a regular file, or of one to create in an existing directory, to write.
    pub fn file_to_write(&self) -> Result<PathBuf, InsideRootError> {
        match (self.kind(), self.missing.len()) {
            (Some(EntryKind::RegularFile), _) | (None, 1) => Ok(self.path()),
            (Some(kind), _) => Err(self.not_regular(kind)),
            (None, _) => {
                let dir = self.existing.join(&self.missing[0]);
                Err(InsideRootError::MissingDirectory {
                    path: self.requested.clone(),
                    dir: dir.strip_prefix(&self.root).unwrap_or(&dir).to_owned(),
                })
            }
        }
    }

    /// Opens the existing regular file for reading. The open itself refuses any link on the
    /// resolved path, so a directory swapped for a link after [`Root::resolve`] is refused too;
    /// a FIFO or device is refused without blocking.
    pub fn open_file(&self) -> Result<File, InsideRootError> {
        let path = self.existing_file()?;
        let file = open_without_links(&path, OFlag::O_RDONLY)
            .map_err(|source| open_error(&self.requested, source))?;
        require_regular(&file, &self.requested)?;
        Ok(file)
    }

    /// Reads the whole regular file, refusing one larger than `limit` bytes, as
    /// [`Resolved::open_file`] opens it.
    pub fn read_file(&self, limit: u64) -> Result<Vec<u8>, InsideRootError> {
        read_limited(self.open_file()?, &self.requested, limit)
    }

    /// Writes `bytes` to the regular file, creating it when missing. The open refuses any link
    /// on the resolved path (one put there after [`Root::resolve`] included), a FIFO, a device
    /// or a directory before a byte changes.
    pub fn write_file(&self, bytes: &[u8]) -> Result<(), InsideRootError> {
        let path = self.file_to_write()?;
        let file = open_without_links(&path, OFlag::O_WRONLY | OFlag::O_CREAT)
            .map_err(|source| open_error(&self.requested, source))?;
        write_whole(file, &self.requested, bytes)
    }

    /// Creates the missing directories above the final name, one at a time (an entry that
    /// appears meanwhile fails the call instead of being followed). Resolve again afterwards.
    pub fn create_missing_parents(&self) -> Result<(), InsideRootError> {
        let mut dir = self.existing.clone();
        let parents = self.missing.len().saturating_sub(1);
        for name in &self.missing[..parents] {
            dir.push(name);
            std::fs::create_dir(&dir).map_err(|source| InsideRootError::Io {
                path: self.requested.clone(),
                source,
            })?;
        }
        Ok(())
    }

    fn not_regular(&self, kind: EntryKind) -> InsideRootError {
        InsideRootError::NotRegular {
            path: self.requested.clone(),
            kind: kind.describe(),
        }
    }
}

/// Opens without following a final link and without blocking on a FIFO or device.
fn open_flags() -> i32 {
    (OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits()
}

/// Fails unless the opened file is regular (a FIFO, device or link put in place after a check
/// is refused here).
fn require_regular(file: &File, path: &Path) -> Result<(), InsideRootError> {
    let meta = file.metadata().map_err(|source| InsideRootError::Io {
        path: path.to_owned(),
        source,
    })?;
    match EntryKind::of(&meta) {
        EntryKind::RegularFile => Ok(()),
        kind => Err(InsideRootError::NotRegular {
            path: path.to_owned(),
            kind: kind.describe(),
        }),
    }
}

fn open_error(path: &Path, source: io::Error) -> InsideRootError {
    let path = path.to_owned();
    if source.kind() == io::ErrorKind::NotFound {
        return InsideRootError::NotFound { path };
    }
    match refused_kind(&source) {
        Some(kind) => InsideRootError::NotRegular { path, kind },
        None => InsideRootError::Io { path, source },
    }
}

/// What an `open` error says the entry is: a final link (`O_NOFOLLOW`), a directory opened for
/// writing, a FIFO or device with no reader (`O_NONBLOCK`).
fn refused_kind(error: &io::Error) -> Option<&'static str> {
    match error.raw_os_error()? {
        nix::libc::ELOOP => Some("a symbolic link"),
        nix::libc::EISDIR => Some("a directory"),
        nix::libc::ENXIO => Some("a FIFO or device"),
        _ => None,
    }
}

/// Opens a regular file for reading: a final link, a FIFO, a device or a directory is refused
/// without blocking.
pub fn open_regular_for_read(path: &Path) -> Result<File, InsideRootError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(open_flags())
        .open(path)
        .map_err(|source| open_error(path, source))?;
    require_regular(&file, path)?;
    Ok(file)
}

/// Reads a whole regular file, refusing one larger than `limit` bytes (it is not read past
/// the limit).
pub fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, InsideRootError> {
    read_limited(open_regular_for_read(path)?, path, limit)
}

/// Reads `file` to its end, refusing more than `limit` bytes (it is not read past the limit).
fn read_limited(file: File, path: &Path, limit: u64) -> Result<Vec<u8>, InsideRootError> {
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| InsideRootError::Io {
            path: path.to_owned(),
            source,
        })?;
    if bytes.len() as u64 > limit {
        return Err(InsideRootError::TooLarge {
            path: path.to_owned(),
            limit,
        });
    }
    Ok(bytes)
}

/// Replaces the content of an opened file, once it is known to be a regular one.
fn write_whole(mut file: File, path: &Path, bytes: &[u8]) -> Result<(), InsideRootError> {
    require_regular(&file, path)?;
    let io_error = |source| InsideRootError::Io {
        path: path.to_owned(),
        source,
    };
    file.set_len(0).map_err(io_error)?;
    file.write_all(bytes).map_err(io_error)
}

/// Opens `path`, which resolution found free of links, refusing a link on any of its
/// components (`openat2` with `RESOLVE_NO_SYMLINKS`): one that appeared since the resolution
/// makes the open fail with `ELOOP` instead of leading out of the root. Never blocks on a FIFO.
/// Where the kernel has no `openat2` (before Linux 5.6, or filtered by a sandbox) it falls back
/// to refusing a final link only.
fn open_without_links(path: &Path, access: OFlag) -> io::Result<File> {
    let flags = access | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let mut how = OpenHow::new()
        .flags(flags)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    if access.contains(OFlag::O_CREAT) {
        // A mode is given only with O_CREAT (openat2 refuses one otherwise); umask applies.
        how = how.mode(Mode::from_bits_truncate(0o666));
    }
    match openat2(AT_FDCWD, path, how) {
        Ok(fd) => Ok(File::from(fd)),
        Err(Errno::ENOSYS | Errno::EPERM) => OpenOptions::new()
            .read(!access.contains(OFlag::O_WRONLY))
            .write(access.contains(OFlag::O_WRONLY))
            .create(access.contains(OFlag::O_CREAT))
            .custom_flags(open_flags())
            .open(path),
        Err(errno) => Err(io::Error::from(errno)),
    }
}
