//! `ski-conformance matrix`: one selection against several targets, compared in one table of
//! rows × targets (`matrix.md` and a self-contained `report.html`). Each target is run by the
//! same `ski-conformance run` a user would type, into a subdirectory of its own, and the matrix
//! is built from those `results.json` files, so a cell is by construction what that target's own
//! run said; `--from` builds it from earlier runs without running anything.
//!
//! - [`target_arg`]: the columns as the command line names them, with their labels.
//! - [`runs`]: one target's `run`, as a child process.
//! - [`table`]: the matrix itself, built from `results.json` files.
//! - [`markdown`]: `matrix.md`; the page is [`crate::report::html`].
//! - [`redact`]: this machine's paths written as placeholders in both.

pub mod markdown;
pub mod redact;
pub mod runs;
pub mod table;
pub mod target_arg;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use ski::cli::output;

use crate::catalog::{self, CatalogSet, Category};
use crate::select::{Glob, Selection};
use table::{ColumnInput, Matrix};
use target_arg::{TargetArg, TargetSource};

/// The examples of `ski-conformance matrix --help`.
pub const EXAMPLES: &str = "\
Examples:
  ski-conformance matrix --target ref=reference --agent-cmd 'echo=node echo-agent.mjs' --suite acp
      The ACP rows against the reference and an agent of yours, side by side.
  ski-conformance matrix --target reference --target ts-sdk-echo --target py-sdk-echo --id 'WS-0*'
      Three profiles; each column is labelled with its profile's name.
  ski-conformance matrix --from ref=runs/reference --from mine=runs/mine --out cmp
      A matrix of two earlier runs (their results.json), without running anything.

Writes OUT/matrix.md, OUT/report.html and each run's own reports in OUT/LABEL/. Rows every target
skipped are folded into one line unless --show-skipped; local paths are written as placeholders. Columns come in
the order --from, --target, --agent-cmd, --agent-url, each in the order given.
Exit codes: 0 every target's run as expected, 1 a target's run not as expected, 2 a usage error
or a target whose run left no results.json (its column says why).";

/// The options of `ski-conformance matrix`.
#[derive(Debug, Args)]
pub struct MatrixArgs {
    /// A target profile to run, as a column: `[LABEL=]PROFILE` (repeatable; the label defaults
    /// to the profile's name).
    #[arg(
        long = "target",
        value_name = "[LABEL=]PROFILE",
        help_heading = "Targets"
    )]
    targets: Vec<String>,
    /// An ACP agent command (stdio) to run, as a column: `[LABEL=]CMD` (repeatable).
    #[arg(
        long = "agent-cmd",
        value_name = "[LABEL=]CMD",
        help_heading = "Targets"
    )]
    agent_cmds: Vec<String>,
    /// An ACP agent's WebSocket URL, as a column: `[LABEL=]URL` (repeatable).
    #[arg(
        long = "agent-url",
        value_name = "[LABEL=]URL",
        help_heading = "Targets"
    )]
    agent_urls: Vec<String>,
    /// An earlier run's results, as a column, not run again: `[LABEL=]DIR` or
    /// `[LABEL=]DIR/results.json` (repeatable).
    #[arg(long = "from", value_name = "[LABEL=]DIR", help_heading = "Targets")]
    from: Vec<String>,
    /// For every ad-hoc target: a capability it declares besides what discovery finds.
    #[arg(long = "capability", value_name = "NAME", help_heading = "Targets")]
    capabilities: Vec<String>,
    /// For every ad-hoc target: a capability it does not declare even if discovery finds it.
    #[arg(long = "no-capability", value_name = "NAME", help_heading = "Targets")]
    no_capabilities: Vec<String>,
    /// For every ad-hoc target: no discovery; declare its capabilities with --capability.
    #[arg(long, help_heading = "Targets")]
    no_discover: bool,
    /// For every ad-hoc target: your HOME instead of a fresh one per scenario.
    #[arg(long, help_heading = "Targets")]
    shared_home: bool,
    /// The directory of the binaries under test; default: this binary's directory.
    #[arg(long, value_name = "DIR", help_heading = "Targets")]
    bin_dir: Option<PathBuf>,
    /// Only these suites (repeatable); rows of --from runs are selected the same way.
    #[arg(long = "suite", value_name = "SUITE", help_heading = "Selection")]
    suites: Vec<String>,
    /// Only scenario IDs matching these globs (repeatable).
    #[arg(long = "id", value_name = "GLOB", help_heading = "Selection")]
    ids: Vec<Glob>,
    /// Only these categories (repeatable).
    #[arg(long = "category", value_name = "CATEGORY", help_heading = "Selection")]
    categories: Vec<Category>,
    /// Load catalogs from this directory instead of the ones built in.
    #[arg(long, value_name = "DIR", help_heading = "Selection")]
    catalog_dir: Option<PathBuf>,
    /// Scenarios each run runs at once (the targets run one after another).
    #[arg(long, short = 'j', value_name = "N", help_heading = "Execution")]
    jobs: Option<usize>,
    /// Multiply every timeout class by this (also SKI_TIMEOUT_MULTIPLIER).
    #[arg(long, value_name = "FACTOR", help_heading = "Execution")]
    timeout_multiplier: Option<f64>,
    /// Do not re-run unexpected failures alone.
    #[arg(long, help_heading = "Execution")]
    no_rerun: bool,
    /// Hold should and interop rows to each run's verdict too.
    #[arg(long, help_heading = "Execution")]
    strict: bool,
    /// Show the rows every target skipped (by default they are folded into one line).
    #[arg(long, help_heading = "Results")]
    show_skipped: bool,
    /// Where matrix.md, report.html and each target's reports (in LABEL/) go.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "target/conformance/matrix",
        help_heading = "Results"
    )]
    out: PathBuf,
}

impl MatrixArgs {
    /// The columns, in the order --from, --target, --agent-cmd, --agent-url.
    fn columns(&self) -> Result<Vec<TargetArg>> {
        let mut columns = Vec::new();
        for text in &self.from {
            columns.push(TargetArg::results(text).map_err(anyhow::Error::msg)?);
        }
        for text in &self.targets {
            columns.push(TargetArg::profile(text).map_err(anyhow::Error::msg)?);
        }
        for text in &self.agent_cmds {
            columns.push(TargetArg::agent_cmd(text).map_err(anyhow::Error::msg)?);
        }
        for text in &self.agent_urls {
            columns.push(TargetArg::agent_url(text).map_err(anyhow::Error::msg)?);
        }
        if columns.is_empty() {
            bail!("no target: name at least one with --target, --agent-cmd, --agent-url or --from");
        }
        let mut seen = BTreeSet::new();
        for column in &columns {
            if !seen.insert(column.label.as_str()) {
                bail!(
                    "two targets are labelled {:?}: give one a label of its own (LABEL=...)",
                    column.label
                );
            }
        }
        let ad_hoc = columns.iter().any(|c| {
            matches!(
                c.source,
                TargetSource::AgentCmd(_) | TargetSource::AgentUrl(_)
            )
        });
        if !ad_hoc && !self.ad_hoc_args().is_empty() {
            bail!(
                "--capability, --no-capability, --no-discover and --shared-home only apply to ad-hoc targets (--agent-cmd or --agent-url)"
            );
        }
        Ok(columns)
    }

    /// The selection, as `run` takes it.
    fn selection(&self) -> Selection {
        Selection {
            suites: self.suites.clone(),
            ids: self.ids.clone(),
            categories: self.categories.clone(),
            shard: None,
        }
    }

    /// Whether the matrix shows a row of a run: it is in the selection.
    fn selects(&self, result: &crate::runner::ScenarioResult) -> bool {
        (self.suites.is_empty() || self.suites.contains(&result.suite))
            && (self.ids.is_empty() || self.ids.iter().any(|g| g.matches(&result.id)))
            && (self.categories.is_empty() || self.categories.contains(&result.category))
    }

    /// What every run is given besides its target and `--out`.
    fn common_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["--quiet".into()];
        for suite in &self.suites {
            args.extend(["--suite".into(), suite.into()]);
        }
        for id in &self.ids {
            args.extend(["--id".into(), id.to_string().into()]);
        }
        for category in &self.categories {
            args.extend(["--category".into(), category.as_str().into()]);
        }
        if let Some(dir) = &self.catalog_dir {
            args.extend(["--catalog-dir".into(), dir.as_os_str().to_owned()]);
        }
        if let Some(dir) = &self.bin_dir {
            args.extend(["--bin-dir".into(), dir.as_os_str().to_owned()]);
        }
        if let Some(jobs) = self.jobs {
            args.extend(["--jobs".into(), jobs.to_string().into()]);
        }
        if let Some(factor) = self.timeout_multiplier {
            args.extend(["--timeout-multiplier".into(), factor.to_string().into()]);
        }
        if self.no_rerun {
            args.push("--no-rerun".into());
        }
        if self.strict {
            args.push("--strict".into());
        }
        args
    }

    /// What only the runs of ad-hoc targets are given.
    fn ad_hoc_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        for name in &self.capabilities {
            args.extend(["--capability".into(), name.into()]);
        }
        for name in &self.no_capabilities {
            args.extend(["--no-capability".into(), name.into()]);
        }
        if self.no_discover {
            args.push("--no-discover".into());
        }
        if self.shared_home {
            args.push("--shared-home".into());
        }
        args
    }

    fn catalogs(&self) -> Result<CatalogSet> {
        match &self.catalog_dir {
            Some(dir) => Ok(CatalogSet::load_dir(dir)?),
            None => Ok(catalog::builtin()?),
        }
    }
}

/// Runs `ski-conformance matrix`; answers its exit code.
pub fn main(args: MatrixArgs) -> Result<u8> {
    let columns = args.columns()?;
    let catalogs = args.catalogs()?;
    if args.jobs == Some(0) {
        bail!("--jobs must be at least 1");
    }
    if let Some(factor) = args.timeout_multiplier
        && !(factor.is_finite() && factor > 0.0)
    {
        bail!("--timeout-multiplier must be a positive number");
    }
    for column in &columns {
        if let TargetSource::Results(_) = column.source {
            let path = column.results_path(&args.out);
            if !path.is_file() {
                bail!(
                    "--from {}: {} is not a file (name the directory of a run, or its results.json)",
                    column.label,
                    path.display()
                );
            }
        }
    }
    let program = std::env::current_exe().context("cannot locate this binary to run targets")?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let common = args.common_args();
    let ad_hoc = args.ad_hoc_args();
    let mut inputs = Vec::new();
    for column in &columns {
        let results = column.results_path(&args.out);
        let mut problem = None;
        if column.runs() {
            output::line(format_args!("matrix: running {}", column.label));
            let mut own = common.clone();
            if matches!(
                column.source,
                TargetSource::AgentCmd(_) | TargetSource::AgentUrl(_)
            ) {
                own.extend(ad_hoc.iter().cloned());
            }
            let finished = runtime.block_on(runs::run_one(&program, column, &own, &args.out));
            if !results.is_file() {
                problem = Some(format!(
                    "the run {} and wrote no results.json{}",
                    match finished.code {
                        Some(code) => format!("exited {code}"),
                        None => "was ended by a signal".to_owned(),
                    },
                    match finished.stderr_tail.last() {
                        Some(line) => format!(": {line}"),
                        None => String::new(),
                    }
                ));
            }
        }
        let mut report = match problem {
            Some(problem) => Err(problem),
            None => crate::merge::load_results(&results).map_err(|e| e.to_string()),
        };
        if let Ok(report) = &mut report {
            // An earlier run may hold more rows than the matrix selects.
            report.results.retain(|r| args.selects(r));
        }
        if let (Err(problem), false) = (&report, column.runs()) {
            bail!("--from {}: {problem}", column.label);
        }
        inputs.push(ColumnInput {
            label: column.label.clone(),
            results: relative_to(&results, &args.out),
            report,
        });
    }
    let selection = args.selection().describe();
    let mut matrix = Matrix::build(selection, inputs, &catalogs, &redact::Redactor::local());
    matrix.show_skipped = args.show_skipped;
    let markdown_path = args.out.join("matrix.md");
    let html_path = args.out.join("report.html");
    write(&markdown_path, &markdown::render(&matrix))?;
    write(&html_path, &crate::report::html::render(&matrix))?;
    output::text(&summary(&matrix));
    output::line(format_args!(
        "matrix: {}, {}",
        markdown_path.display(),
        html_path.display()
    ));
    Ok(matrix.exit_code())
}

/// One line per target: its counts as its own run gives them, or why it has none.
fn summary(matrix: &Matrix) -> String {
    let mut text = String::new();
    for column in &matrix.columns {
        match &column.problem {
            Some(problem) => text.push_str(&format!("{}: {problem}\n", column.label)),
            None => text.push_str(&format!(
                "{}: {}\n",
                column.label,
                table::counts_text(column)
            )),
        }
    }
    text
}

/// `path` relative to `base` when it lies under it, else as given.
fn relative_to(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .display()
        .to_string()
}

fn write(path: &Path, text: &str) -> Result<()> {
    ski::storage::atomic_file::write_atomic(path, text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}
