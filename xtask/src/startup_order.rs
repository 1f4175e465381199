//! `cargo xtask startup-order`: writes `src/bin/ski.order`, the functions of the `ski` program
//! that `ski acp serve` runs from `exec` to its first answers, which the linker then places side
//! by side (see the project's `build.rs`).
//!
//! The functions are found by running the release `ski acp serve` under valgrind's callgrind
//! twice, driven over its stdin: once through `initialize` and end of input, once through
//! `initialize`, `session/new` and one `session/prompt`. The list holds the first run's
//! functions, then the second run's others, each part sorted by name, so that start-up code
//! comes first. Symbol names change with the code and the toolchain: a name the build no longer
//! has is skipped by the linker, so an old list costs start-up time, never correctness. Run this
//! after changing the start-up path, dependencies or the toolchain.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::Value;
use xshell::{Shell, cmd};

use crate::ci::{target_dir, workspace_root};

/// Where the list goes, relative to the workspace root (read by `build.rs`).
const ORDER_FILE: &str = "src/bin/ski.order";

const HEADER: &str = "\
# Functions of the ski program that `ski acp serve` runs from start-up to its first answers,
# laid out together by the linker (see build.rs). Written by `cargo xtask startup-order`.
";

/// Options of `cargo xtask startup-order`.
#[derive(Debug, Args)]
pub struct StartupOrderArgs {
    /// Print what the list would hold and how it differs from the current one; write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// How far a traced run of `ski acp serve` goes before its input ends.
#[derive(Clone, Copy)]
enum Drive {
    Initialize,
    FirstPrompt,
}

/// Builds the release `ski`, traces it and writes (or compares) the list.
pub fn run(args: &StartupOrderArgs) -> Result<()> {
    let sh = Shell::new()?;
    let root = workspace_root();
    sh.change_dir(&root);
    if cmd!(sh, "valgrind --version").quiet().read().is_err() {
        bail!("cargo xtask startup-order needs valgrind (e.g. apt-get install valgrind)");
    }
    cmd!(sh, "cargo build --release --locked -p ski --bin ski")
        .run()
        .context("building the release ski program failed")?;
    let target = target_dir(&sh, &root)?;
    let program = fs::canonicalize(target.join("release/ski"))
        .context("the release ski program is missing after the build")?;
    let work = target.join("startup-order");
    fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;

    let start = traced_functions(&program, &work, Drive::Initialize)?;
    let first_answers = traced_functions(&program, &work, Drive::FirstPrompt)?;
    let mut names: Vec<&String> = start.iter().collect();
    names.extend(first_answers.difference(&start));
    let mut list = String::from(HEADER);
    for name in &names {
        list.push_str(name);
        list.push('\n');
    }

    let path = root.join(ORDER_FILE);
    let old: BTreeSet<String> = fs::read_to_string(&path)
        .unwrap_or_default()
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(str::to_owned)
        .collect();
    let new: BTreeSet<String> = names.iter().map(|name| (*name).clone()).collect();
    println!(
        "{} functions ({} at start-up, {} more for the first prompt); {} already listed, {} new, {} gone",
        new.len(),
        start.len(),
        new.len() - start.len(),
        new.intersection(&old).count(),
        new.difference(&old).count(),
        old.difference(&new).count(),
    );
    if args.dry_run {
        return Ok(());
    }
    fs::write(&path, list).with_context(|| format!("cannot write {}", path.display()))?;
    println!("written: {ORDER_FILE}");
    Ok(())
}

/// Runs `program acp serve` under callgrind as far as `drive` says and returns the names of the
/// functions of `program` that ran.
fn traced_functions(program: &Path, work: &Path, drive: Drive) -> Result<BTreeSet<String>> {
    let profile = work.join(match drive {
        Drive::Initialize => "initialize.callgrind",
        Drive::FirstPrompt => "first-prompt.callgrind",
    });
    let mut out_file = std::ffi::OsString::from("--callgrind-out-file=");
    out_file.push(&profile);
    let child = Command::new("valgrind")
        .args(["--tool=callgrind", "--demangle=no", "--dump-instr=no", "-q"])
        .arg(out_file)
        .arg(program)
        .args(["acp", "serve", "--log-level", "error"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot start valgrind")?;
    let mut agent = Traced { child };
    let (stdin, stdout) = agent.pipes()?;
    talk(stdin, stdout, drive)?;
    let status = agent.child.wait().context("waiting for valgrind")?;
    if !status.success() {
        bail!("ski acp serve under valgrind ended with {status}");
    }
    let text = fs::read_to_string(&profile)
        .with_context(|| format!("cannot read {}", profile.display()))?;
    let names = functions_of(&text, program);
    if names.is_empty() {
        bail!(
            "{} names no function of {}",
            profile.display(),
            program.display()
        );
    }
    Ok(names)
}

/// The traced agent; ended if the conversation fails half-way.
struct Traced {
    child: Child,
}

impl Traced {
    fn pipes(&mut self) -> Result<(ChildStdin, BufReader<ChildStdout>)> {
        let stdin = self.child.stdin.take().context("no stdin pipe")?;
        let stdout = self.child.stdout.take().context("no stdout pipe")?;
        Ok((stdin, BufReader::new(stdout)))
    }
}

impl Drop for Traced {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Sends the requests of `drive`, waits for each answer, then closes stdin.
fn talk(mut stdin: ChildStdin, mut stdout: BufReader<ChildStdout>, drive: Drive) -> Result<()> {
    let mut call = |request: String, id: u64| -> Result<Value> {
        stdin.write_all(request.as_bytes())?;
        stdin.write_all(b"\n")?;
        stdin.flush()?;
        let mut line = String::new();
        loop {
            line.clear();
            if stdout.read_line(&mut line)? == 0 {
                bail!("ski acp serve closed stdout before answering request {id}");
            }
            let message: Value = serde_json::from_str(&line)
                .with_context(|| format!("ski acp serve wrote {line:?}"))?;
            if message["id"] == id {
                if message.get("error").is_some() {
                    bail!("request {id} failed: {}", line.trim_end());
                }
                return Ok(message);
            }
        }
    };
    call(
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#.to_owned(),
        0,
    )?;
    if let Drive::FirstPrompt = drive {
        let session = call(
            r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}"#.to_owned(),
            1,
        )?;
        let session = session["result"]["sessionId"]
            .as_str()
            .context("session/new answered no sessionId")?
            .to_owned();
        call(
            format!(
                r#"{{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{{"sessionId":"{session}","prompt":[{{"type":"text","text":"hello"}}]}}}}"#
            ),
            2,
        )?;
    }
    Ok(())
}

/// The functions of `program` that have costs in a callgrind profile. Callgrind names objects
/// and functions once, as `ob=(N) path` and `fn=(N) name`, then by number alone; a `fn=` line
/// belongs to the object of the `ob=` line before it. Recursion levels (`name'2`) are folded.
fn functions_of(profile: &str, program: &Path) -> BTreeSet<String> {
    let mut objects: HashMap<&str, &str> = HashMap::new();
    let mut functions: HashMap<&str, &str> = HashMap::new();
    let mut current_object = "";
    let mut found = BTreeSet::new();
    let program = program.to_string_lossy();
    for line in profile.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let Some(rest) = value.strip_prefix('(') else {
            continue;
        };
        let Some((number, name)) = rest.split_once(')') else {
            continue;
        };
        let name = name.trim_start();
        let table = match key {
            "ob" | "cob" => &mut objects,
            "fn" | "cfn" => &mut functions,
            _ => continue,
        };
        if !name.is_empty() {
            table.insert(number, name);
        }
        let Some(&known) = table.get(number) else {
            continue;
        };
        match key {
            "ob" => current_object = known,
            "fn" if current_object == program => {
                let name = known.split_once('\'').map_or(known, |(name, _)| name);
                if !name.starts_with("0x") && name != "(below main)" {
                    found.insert(name.to_owned());
                }
            }
            _ => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_are_taken_from_the_program_object_only() {
        let profile = "\
ob=(1) /bin/ski
fn=(1) _ZN3ski4main17h0000000000000000E
1 10
cob=(2) /lib/libc.so.6
cfn=(2) memcpy
calls=1 0
1 5
fn=(3) _ZN3ski3run17h1111111111111111E'2
1 3
ob=(2)
fn=(2)
1 5
ob=(1)
fn=(4) 0x0000000000401000
1 1
fn=(1)
1 1
";
        let names: Vec<String> = functions_of(profile, Path::new("/bin/ski"))
            .into_iter()
            .collect();
        assert_eq!(
            names,
            [
                "_ZN3ski3run17h1111111111111111E",
                "_ZN3ski4main17h0000000000000000E"
            ]
        );
    }

    #[test]
    fn the_order_file_path_is_the_one_the_build_script_reads() {
        let build_script = fs::read_to_string(workspace_root().join("build.rs")).unwrap();
        assert!(build_script.contains(ORDER_FILE));
    }
}
