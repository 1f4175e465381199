//! The one reader of `/proc`: which processes exist, with their name, state, parent, group and
//! CPU time, and what a process's environment and command line hold. Everything here answers
//! "nothing" where `/proc` cannot be read (another system, a restricted mount), and a process that
//! ends while it is read is left out.

/// Linux reports process times in ticks of `USER_HZ`, fixed at 100 per second for user space.
pub const TICKS_PER_SECOND: f64 = 100.0;

/// One process as `/proc/PID/stat` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    /// The process id.
    pub pid: i32,
    /// The command name (`comm`, at most 15 bytes, as the kernel keeps it).
    pub name: String,
    /// The state letter (`R`, `S`, `D`, `T`, `Z` for a zombie, `X` for dead, …).
    pub state: char,
    /// The parent's pid.
    pub ppid: i32,
    /// The process group id.
    pub pgid: i32,
    /// CPU time of the process and the children it reaped (`utime + stime + cutime + cstime`),
    /// in [`TICKS_PER_SECOND`].
    pub cpu_ticks: u64,
}

impl ProcessInfo {
    /// Whether the process has exited (a zombie not yet reaped, or dead).
    pub fn has_exited(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }

    /// [`ProcessInfo::cpu_ticks`] in seconds.
    pub fn cpu_seconds(&self) -> f64 {
        self.cpu_ticks as f64 / TICKS_PER_SECOND
    }
}

/// Parses one `/proc/PID/stat` line. The command name is in parentheses and may hold spaces or
/// `)`, so the fields are read after the last `)`.
pub fn parse_stat(text: &str) -> Option<ProcessInfo> {
    let (head, tail) = text.rsplit_once(')')?;
    let (pid, name) = head.split_once(" (")?;
    let fields: Vec<&str> = tail.split_whitespace().collect();
    // After the name: state (field 3), ppid (4), pgrp (5), …, utime to cstime (14 to 17).
    let cpu_ticks = fields
        .get(11..15)
        .map(|ticks| ticks.iter().filter_map(|t| t.parse::<u64>().ok()).sum())
        .unwrap_or(0);
    Some(ProcessInfo {
        pid: pid.trim().parse().ok()?,
        name: name.to_owned(),
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgid: fields.get(2)?.parse().ok()?,
        cpu_ticks,
    })
}

/// Whether `/proc` can be read here.
pub fn readable() -> bool {
    std::fs::metadata("/proc/self/stat").is_ok()
}

/// Process `pid` now, if it exists.
pub fn process(pid: i32) -> Option<ProcessInfo> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// This process.
pub fn own() -> Option<ProcessInfo> {
    parse_stat(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

/// Every process `/proc` lists now.
pub fn all() -> Vec<ProcessInfo> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|text| parse_stat(&text))
        .collect()
}

/// Whether process `pid`'s environment holds the entry `NAME=value` exactly.
pub fn environ_holds(pid: i32, entry: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
        environ
            .split(|byte| *byte == 0)
            .any(|var| var == entry.as_bytes())
    })
}

/// Whether process `pid`'s command line (its words joined by NUL) contains `text`.
pub fn command_line_contains(pid: i32, text: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        let stat = parse_stat("42 (a) b (c) Z 7 40 40 0 -1 0 0 0 0 0 3 4 5 6 20").expect("parsed");
        assert_eq!(
            ProcessInfo {
                pid: 42,
                name: "a) b (c".into(),
                state: 'Z',
                ppid: 7,
                pgid: 40,
                cpu_ticks: 18,
            },
            stat
        );
        assert_eq!(None, parse_stat("garbage"));
    }

    #[test]
    fn this_process_is_listed_with_its_own_group() {
        let me = own().expect("/proc/self/stat is readable on Linux");
        assert_eq!(std::process::id() as i32, me.pid);
        assert!(!me.has_exited());
        assert!(all().iter().any(|p| p.pid == me.pid && p.pgid == me.pgid));
        assert!(!environ_holds(me.pid, "SKI_PROCFS_NEVER_SET=x"));
    }

    #[test]
    fn a_child_shows_its_environment_and_command_line() {
        use std::io::{BufRead, Write};
        // The child says it runs, then waits on its stdin, so it is there to be read until the
        // test closes it. Its line is awaited first: `spawn` returns once the exec has begun,
        // and until the new program's stack is set up its environ reads as empty.
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "echo up; read line; echo ski-procfs-marker >/dev/null",
            ])
            .env("SKI_PROCFS_MARK", "on")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sh starts");
        let mut up = String::new();
        std::io::BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut up)
            .expect("the child says it runs");
        assert_eq!("up\n", up);
        let pid = child.id() as i32;
        assert!(environ_holds(pid, "SKI_PROCFS_MARK=on"));
        assert!(!environ_holds(pid, "SKI_PROCFS_MARK=off"));
        assert!(command_line_contains(pid, "ski-procfs-marker"));
        let info = process(pid).expect("the child is listed");
        assert_eq!(std::process::id() as i32, info.ppid);
        let mut stdin = child.stdin.take().expect("piped stdin");
        stdin.write_all(b"done\n").expect("the child reads");
        drop(stdin);
        assert!(child.wait().expect("the child is reaped").success());
    }
}
