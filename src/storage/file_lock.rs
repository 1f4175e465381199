//! Advisory locks on lock files (`flock`), exclusive or shared, held for the life of a guard.
//!
//! They serialise work across processes: two `ski aof` processes handling messages for one task
//! take the same task lock, so neither update is lost. The kernel drops the lock when the holder
//! dies, so a killed process never leaves a task locked.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};

/// A held lock; dropping it releases the lock.
#[derive(Debug)]
pub struct FileLock {
    _flock: Flock<File>,
}

impl FileLock {
    /// Blocks until the exclusive lock on `path` (created when absent) is held.
    pub fn exclusive(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        Self::hold(file, FlockArg::LockExclusive)
    }

    /// Blocks until a shared lock on the existing file `path` is held; creates nothing, so a
    /// reader can take it on a read-only directory. Shared locks exclude only exclusive ones.
    pub fn shared(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        if !file.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a lock file", path.display()),
            ));
        }
        Self::hold(file, FlockArg::LockShared)
    }

    fn hold(file: File, mode: FlockArg) -> io::Result<Self> {
        loop {
            match Flock::lock(file.try_clone()?, mode) {
                Ok(flock) => return Ok(Self { _flock: flock }),
                Err((_, nix::errno::Errno::EINTR)) => continue,
                Err((_, errno)) => return Err(io::Error::from(errno)),
            }
        }
    }
}
