//! The namespace side of `slack = "slack-hosts"`: `ski-conformance netns hold` makes a user,
//! mount and network namespace (loopback up, a hosts file over `/etc/hosts`) and relays its
//! loopback ports to the harness over Unix sockets; `ski-conformance netns enter` runs a command
//! inside the namespaces of a holder. Both run before any thread exists (a process with threads
//! can neither make nor join a user namespace), so the CLI calls them before it starts a runtime.
//!
//! The relays speak one header: a connection on a relay socket begins with the loopback port it
//! is for, in decimal, and a newline; then bytes flow unchanged both ways (TLS passes through).
//! The inward relay first answers one byte, whether the port inside accepted the connection, so
//! that the harness can probe a port inside the namespace.

use std::ffi::{CString, OsString};
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::sched::{CloneFlags, setns, unshare};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

/// The socket in the relay directory the harness listens on: connections from inside to the fake.
pub const OUTWARD_SOCKET: &str = "outward.sock";
/// The socket in the relay directory the holder listens on: connections from outside to inside.
pub const INWARD_SOCKET: &str = "inward.sock";
/// What the holder prints on stdout once everything listens.
pub const READY: &str = "netns ready";
/// The longest relay header: five digits and the newline.
const MAX_HEADER: usize = 6;
/// The inward relay's answer to a header: the port inside accepted the connection (bytes flow
/// from here on), or refused it (the relay closes).
pub const CONNECTED: u8 = b'+';
pub const REFUSED: u8 = b'-';

/// Why a namespace could not be made or joined.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error(
        "this machine refuses an unprivileged user, mount and network namespace (unshare: {0}); \
         slack = \"slack-hosts\" cannot run here"
    )]
    Refused(nix::Error),
    #[error("cannot {what}: {source}")]
    Io { what: String, source: io::Error },
}

fn io_error(what: impl Into<String>) -> impl FnOnce(io::Error) -> NetnsError {
    let what = what.into();
    move |source| NetnsError::Io { what, source }
}

fn nix_error(what: &str) -> impl FnOnce(nix::Error) -> NetnsError + '_ {
    move |errno| NetnsError::Io {
        what: what.to_owned(),
        source: io::Error::from(errno),
    }
}

/// `netns hold`: makes the namespaces, listens on `ports` inside them and on the inward socket,
/// prints [`READY`] and relays until stdin closes. Must run before any other thread exists.
pub fn hold(hosts: &Path, relay_dir: &Path, ports: &[u16]) -> Result<(), NetnsError> {
    enter_new_namespaces(hosts)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io_error("start the relay runtime"))?;
    runtime.block_on(relay_inside(relay_dir, ports))
}

/// `netns enter`: joins the namespaces of the holder `pid` (user first, then mount and network)
/// and replaces this process with `command`, keeping its environment and working directory.
/// Must run before any other thread exists. Answers only when that fails.
pub fn enter(pid: u32, command: &[OsString]) -> NetnsError {
    match join_and_exec(pid, command) {
        Ok(never) => match never {},
        Err(error) => error,
    }
}

fn join_and_exec(pid: u32, command: &[OsString]) -> Result<std::convert::Infallible, NetnsError> {
    let Some((program, args)) = command.split_first() else {
        return Err(NetnsError::Io {
            what: "enter the namespace".into(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "no command to run"),
        });
    };
    let open = |kind: &str| {
        let path = format!("/proc/{pid}/ns/{kind}");
        File::open(&path).map_err(io_error(format!("open {path}")))
    };
    let (user, mount, net) = (open("user")?, open("mnt")?, open("net")?);
    // Joining a mount namespace moves the working directory to its root: keep it.
    let cwd = std::env::current_dir().map_err(io_error("read the working directory"))?;
    setns(&user, CloneFlags::CLONE_NEWUSER).map_err(nix_error("join the user namespace"))?;
    setns(&mount, CloneFlags::CLONE_NEWNS).map_err(nix_error("join the mount namespace"))?;
    setns(&net, CloneFlags::CLONE_NEWNET).map_err(nix_error("join the network namespace"))?;
    die_with_parent()?;
    let error = Command::new(program).args(args).current_dir(cwd).exec();
    Err(NetnsError::Io {
        what: format!("run {}", program.to_string_lossy()),
        source: error,
    })
}

/// The parent-death signal the spawner set is cleared when the credentials change (a new user
/// namespace): set it again.
fn die_with_parent() -> Result<(), NetnsError> {
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .map_err(nix_error("set the parent-death signal"))
}

/// A new user, mount and network namespace for this process, with this user's own id mapped
/// (the commands run later keep their uid), mounts private, `hosts` over `/etc/hosts` and the
/// loopback interface up.
fn enter_new_namespaces(hosts: &Path) -> Result<(), NetnsError> {
    let me = std::fs::metadata("/proc/self").map_err(io_error("read this process's ids"))?;
    let (uid, gid) = (me.uid(), me.gid());
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWNET)
        .map_err(NetnsError::Refused)?;
    die_with_parent()?;
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(io_error(format!("write {file}")))
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    mount(None, Path::new("/"), libc::MS_REC | libc::MS_PRIVATE)
        .map_err(io_error("make the mounts private"))?;
    mount(Some(hosts), Path::new("/etc/hosts"), libc::MS_BIND).map_err(io_error(format!(
        "bind {} over /etc/hosts",
        hosts.display()
    )))?;
    loopback_up().map_err(io_error("bring the loopback interface up"))
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
}

/// mount(2) with no file system type and no data: a bind mount, or a propagation change.
#[allow(unsafe_code)]
fn mount(source: Option<&Path>, target: &Path, flags: libc::c_ulong) -> io::Result<()> {
    let source = source.map(c_path).transpose()?;
    let target = c_path(target)?;
    let source_ptr = source.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
    // SAFETY: both strings are NUL-terminated and outlive the call; a null source, type and
    // data are allowed for these flags.
    let result = unsafe {
        libc::mount(
            source_ptr,
            target.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets `IFF_UP` on `lo` with the SIOCGIFFLAGS/SIOCSIFFLAGS ioctls (no `ip` program needed).
#[allow(unsafe_code)]
fn loopback_up() -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // Any socket of the namespace carries interface ioctls; binding needs no interface.
    let socket = std::net::UdpSocket::bind("0.0.0.0:0")?;
    // SAFETY: ifreq is plain old data; all zeroes is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo") {
        *slot = *byte as libc::c_char;
    }
    // SAFETY: the request is a valid ifreq naming `lo`, and the fd an open socket; the kernel
    // writes only the flags member.
    if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut request) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    unsafe { request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
    // SAFETY: as above; the kernel only reads the request.
    if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &request) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Inside the namespaces: each loopback port of `ports` relays outward, the inward socket relays
/// to the loopback port its header names; ends when stdin closes.
async fn relay_inside(relay_dir: &Path, ports: &[u16]) -> Result<(), NetnsError> {
    let outward = relay_dir.join(OUTWARD_SOCKET);
    for port in ports {
        let listener = TcpListener::bind(("127.0.0.1", *port))
            .await
            .map_err(io_error(format!("listen on 127.0.0.1:{port} inside")))?;
        tokio::spawn(relay_outward(listener, *port, outward.clone()));
    }
    let inward_path = relay_dir.join(INWARD_SOCKET);
    let inward = UnixListener::bind(&inward_path)
        .map_err(io_error(format!("listen on {}", inward_path.display())))?;
    tokio::spawn(relay_inward(inward));
    let mut stdout = tokio::io::stdout();
    let announce = async {
        stdout.write_all(format!("{READY}\n").as_bytes()).await?;
        stdout.flush().await
    };
    announce
        .await
        .map_err(io_error("print the readiness line"))?;
    // The harness ends the holder by closing its stdin (or by killing its process group).
    let _ = tokio::io::copy(&mut tokio::io::stdin(), &mut tokio::io::sink()).await;
    Ok(())
}

async fn relay_outward(listener: TcpListener, port: u16, outward: PathBuf) {
    while let Ok((mut inside, _)) = listener.accept().await {
        let outward = outward.clone();
        tokio::spawn(async move {
            let Ok(mut outside) = UnixStream::connect(&outward).await else {
                return;
            };
            if outside.write_all(header(port).as_bytes()).await.is_ok() {
                let _ = tokio::io::copy_bidirectional(&mut inside, &mut outside).await;
            }
        });
    }
}

async fn relay_inward(listener: UnixListener) {
    while let Ok((outside, _)) = listener.accept().await {
        tokio::spawn(async move {
            let mut outside = BufReader::new(outside);
            let Ok(port) = read_header(&mut outside).await else {
                return;
            };
            let Ok(mut inside) = TcpStream::connect(("127.0.0.1", port)).await else {
                let _ = outside.write_all(&[REFUSED]).await;
                return;
            };
            if outside.write_all(&[CONNECTED]).await.is_ok() {
                let _ = tokio::io::copy_bidirectional(&mut outside, &mut inside).await;
            }
        });
    }
}

/// The header of a relayed connection for `port`.
pub fn header(port: u16) -> String {
    format!("{port}\n")
}

/// Reads a relay header: the port, at most [`MAX_HEADER`] bytes with its newline.
pub async fn read_header(reader: &mut (impl AsyncBufRead + Unpin)) -> io::Result<u16> {
    let mut line = Vec::with_capacity(MAX_HEADER);
    let mut limited = reader.take(MAX_HEADER as u64);
    limited.read_until(b'\n', &mut line).await?;
    let text = std::str::from_utf8(&line).unwrap_or("");
    text.strip_suffix('\n')
        .and_then(|port| port.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "a bad relay header"))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn parse(bytes: &[u8]) -> io::Result<u16> {
        read_header(&mut BufReader::new(bytes)).await
    }

    #[tokio::test]
    async fn a_header_names_the_port_and_leaves_the_bytes_after_it() {
        let mut reader = BufReader::new(&b"443\n\x16\x03\x01"[..]);
        assert_eq!(443, read_header(&mut reader).await.unwrap());
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).await.unwrap();
        assert_eq!(b"\x16\x03\x01", rest.as_slice());
        assert_eq!(header(65535), "65535\n");
    }

    #[tokio::test]
    async fn a_bad_header_is_refused() {
        for bytes in [
            &b""[..],
            b"443",
            b"https\n",
            b"65536\n",
            b"1234567\n",
            b"\xff\n",
        ] {
            assert!(parse(bytes).await.is_err(), "{bytes:?}");
        }
    }
}
