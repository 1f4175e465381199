//! `cargo xtask bench --bench slack --with-other-slack`: the nearest installable fake Slack,
//! vercel-labs' `emulate` (its `slack` service), installed at a pinned version from npm into
//! `peers/slack-emulate` under the target directory (with the Node.js it needs, also from npm:
//! `emulate` 0.12 imports `module.registerHooks`, which Node 20 lacks), started on a free
//! loopback port for the `slack` benchmark and ended when it is done. Nothing of it is in the
//! repository.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use xshell::{Shell, cmd};

/// The `emulate` release measured.
pub const EMULATE_VERSION: &str = "0.12.2";

/// The Node.js release it runs on (npm's `node` package, which installs that release's binary).
const NODE_VERSION: &str = "22.23.3";

/// How long `emulate` may take to say it is ready before the benchmark gives up on it.
const READY_WITHIN: Duration = Duration::from_secs(120);

/// A running `emulate`, ended (by its process id) when dropped.
pub struct OtherSlack {
    child: Child,
    /// Its Web API base URL, `http://127.0.0.1:PORT/api`.
    pub base_url: String,
}

impl Drop for OtherSlack {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Installs the pinned `emulate` under `target/peers/slack-emulate` unless it is there already.
pub fn install(sh: &Shell, target: &Path) -> Result<PathBuf> {
    let dir = target.join("peers").join("slack-emulate");
    let installed = |package: &str| {
        std::fs::read_to_string(dir.join("node_modules").join(package).join("package.json"))
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|manifest| manifest["version"].as_str().map(str::to_owned))
    };
    if installed("emulate").as_deref() == Some(EMULATE_VERSION)
        && installed("node").as_deref() == Some(NODE_VERSION)
        && dir.join("node_modules/.bin/node").exists()
    {
        return Ok(dir);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let manifest = serde_json::json!({
        "name": "ski-bench-slack-emulate",
        "private": true,
        "dependencies": { "emulate": EMULATE_VERSION, "node": NODE_VERSION },
    });
    std::fs::write(
        dir.join("package.json"),
        serde_json::to_string_pretty(&manifest)?,
    )?;
    let _dir = sh.push_dir(&dir);
    cmd!(sh, "npm install --no-audit --no-fund --loglevel=error")
        .run()
        .with_context(|| {
            format!("installing emulate {EMULATE_VERSION} with npm into {} failed (npm and Node.js are needed)", dir.display())
        })?;
    Ok(dir)
}

/// Starts the installed `emulate`'s `slack` service on a free loopback port and waits for its
/// "Ready." line.
pub fn start(dir: &Path) -> Result<OtherSlack> {
    // A port the system just handed out: free unless something takes it in between, in which
    // case emulate fails to listen and says so.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut child = Command::new(dir.join("node_modules/.bin/node"))
        .arg(dir.join("node_modules/emulate/dist/index.js"))
        .args([
            "start",
            "--service",
            "slack",
            "--host",
            "127.0.0.1",
            "--port",
        ])
        .arg(port.to_string())
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot start emulate from {}", dir.display()))?;
    let stdout = child.stdout.take().context("emulate's stdout")?;
    let other = OtherSlack {
        child,
        base_url: format!("http://127.0.0.1:{port}/api"),
    };
    let (ready, seen) = mpsc::channel();
    std::thread::spawn(move || {
        let mut said = Vec::new();
        let mut lines = BufReader::new(stdout).lines();
        for line in lines.by_ref() {
            let Ok(line) = line else { break };
            if line.trim() == "Ready." {
                let _ = ready.send(Ok(()));
                // Read on, so that emulate never blocks on a full pipe.
                lines.for_each(drop);
                return;
            }
            said.push(line);
        }
        let _ = ready.send(Err(said.join("\n")));
    });
    match seen.recv_timeout(READY_WITHIN) {
        Ok(Ok(())) => Ok(other),
        Ok(Err(said)) => bail!("emulate ended before it was ready:\n{said}"),
        Err(_) => bail!(
            "emulate said nothing like \"Ready.\" within {} s",
            READY_WITHIN.as_secs()
        ),
    }
}
