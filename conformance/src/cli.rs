//! The `ski-conformance` command line: `run`, `list` and `explain`.
//!
//! Exit codes: 0 everything as expected (failures listed in the baseline are expected, and
//! failures of `should` and `interop` rows are warnings unless `--strict`); 1 an unexpected
//! failure or error of a row that decides the verdict, a `must` or `capability` row not tested
//! that the baseline does not name, or a stale baseline entry; 2 a usage or
//! configuration error (bad arguments, an invalid catalog, profile or baseline, nothing
//! selected); 130 or 143 a run interrupted by SIGINT or SIGTERM (the report of the rows that
//! started is written, marked interrupted; a second signal ends the run at once without one).

use ski::cli::output;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};

use clap::{Args, Parser, Subcommand};

use crate::baseline::Baseline;
use crate::catalog::{self, CatalogSet, Category};
use crate::check::Check;
use crate::context::Timeouts;
use crate::coverage::{self, SuiteChecks};
use crate::report::{self, console::Console};
use crate::runner::{self, Plan, RunOptions};
use crate::select::{Glob, Selection, Shard};
use crate::suites;
use crate::target::{Target, split_words};

/// Exit code: everything as expected.
pub const EXIT_OK: u8 = 0;
/// Exit code: an unexpected failure or error of a row that decides the verdict, or a stale
/// baseline entry.
pub const EXIT_UNEXPECTED: u8 = 1;
/// Exit code: a usage or configuration error.
pub const EXIT_USAGE: u8 = 2;
/// Exit code of a run interrupted by SIGINT (Ctrl-C); SIGTERM gives 143 (128 plus the signal).
pub const EXIT_INTERRUPTED_SIGINT: u8 = 130;
/// Exit code of a run interrupted by SIGTERM.
pub const EXIT_INTERRUPTED_SIGTERM: u8 = 143;

/// Runs the conformance catalog against a build and reports per scenario.
#[derive(Debug, Parser)]
#[command(name = "ski-conformance", version, about, after_help = EXAMPLES)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

const EXAMPLES: &str = "\
Examples:
  ski-conformance run                                 the reference build, every suite
  ski-conformance run --agent-cmd \"my-agent --stdio\"  an ACP agent of yours, discovered first
  ski-conformance probe --agent-cmd \"my-agent --stdio\" > my-agent.toml
  ski-conformance run --target my-agent.toml --suite acp --id 'WS-06*'
  ski-conformance list --suite acp
  ski-conformance explain WS-001

Exit codes: 0 as expected (a failed should or interop row is a warning unless --strict), 1 an
unexpected failure of a must or capability row (of any asserted row with --strict), a must or
capability row not tested that the baseline does not name, or a stale baseline entry, 2 a usage or configuration error, 130/143 interrupted by SIGINT/SIGTERM (the
rows in flight are ended and the report of what ran is written; a second signal ends at once).";

const RUN_EXAMPLES: &str = "\
Examples:
  ski-conformance run
      Every suite against the reference build (the binaries next to this one).
  ski-conformance run --agent-cmd \"my-agent --stdio\" --min-coverage 80
      An ACP agent over stdio: started once to discover its capabilities, then tested.
  ski-conformance run --agent-url ws://127.0.0.1:4000/ --no-capability echo
      An ACP agent already listening on WebSocket, minus one discovered capability.
  ski-conformance run --target my-agent.toml --baseline my-baseline.toml --out reports
      A saved profile, with its known failures expected.
  ski-conformance run --suite acp --id 'WS-06*' --category edge-case -j 2
      A few rows, two at a time.
  ski-conformance run --strict
      Every row held to the verdict: should and interop failures fail the run too.
  ski-conformance run --shard 2/4 --out shard-2
      The second quarter of a run split across machines (then `ski-conformance merge`).

Exit codes: 0 as expected (a failed should or interop row is a warning unless --strict), 1 an
unexpected failure of a must or capability row (of any asserted row with --strict), a must or
capability row not tested that the baseline does not name, or a stale baseline entry, 2 a usage or configuration error, 130/143 interrupted by SIGINT/SIGTERM (the
rows in flight are ended and the report of what ran is written; a second signal ends at once).";

const LIST_EXAMPLES: &str = "\
Examples:
  ski-conformance list                     every row of every suite
  ski-conformance list --suite acp --json  one suite, as JSON";

const EXPLAIN_EXAMPLES: &str = "\
Examples:
  ski-conformance explain WS-001     the row, its Given/When/Then and how it is checked";

const MERGE_EXAMPLES: &str = "\
Examples:
  ski-conformance merge shard-*/results.json --out merged
  ski-conformance merge a/results.json b/results.json --min-coverage 90";

const BASELINE_EXAMPLES: &str = "\
Examples:
  ski-conformance baseline --from target/conformance/results.json
  ski-conformance baseline --from target/conformance/results.json --out baselines/my-agent.toml";

const PROBE_EXAMPLES: &str = "\
Examples:
  ski-conformance probe --agent-cmd \"my-agent --stdio\" > my-agent.toml
  ski-conformance probe --agent-url ws://127.0.0.1:4000/ --name my-ws-agent
  ski-conformance probe --agent-url http://127.0.0.1:4000/acp --name my-remote-agent
  ski-conformance run --target my-agent.toml    then test with the saved profile";

#[derive(Debug, Subcommand)]
enum Command {
    /// Run scenarios against a target and write report.md, junit.xml and results.json.
    #[command(after_help = RUN_EXAMPLES)]
    Run(Box<RunArgs>),
    /// Print the catalog.
    #[command(after_help = LIST_EXAMPLES)]
    List(ListArgs),
    /// Print one scenario and how it is checked.
    #[command(after_help = EXPLAIN_EXAMPLES)]
    Explain(ExplainArgs),
    /// Combine the results.json files of a sharded run into one report (report.md, junit.xml,
    /// results.json); exits as the whole run would.
    #[command(after_help = MERGE_EXAMPLES)]
    Merge(MergeArgs),
    /// Run one selection against several targets and compare them: matrix.md and a
    /// self-contained report.html of rows × targets.
    #[command(after_help = crate::matrix::EXAMPLES)]
    Matrix(Box<crate::matrix::MatrixArgs>),
    /// Draft a strict baseline from a run's failures (review every reason before you commit it).
    #[command(after_help = BASELINE_EXAMPLES)]
    Baseline(BaselineArgs),
    /// Start an ACP agent once, print what it declares and the target profile (TOML) that
    /// tests it.
    #[command(after_help = PROBE_EXAMPLES)]
    Probe(ProbeArgs),
    /// Processes the engine's own tests start as stand-ins for a target.
    #[command(hide = true, subcommand)]
    Fixture(Fixture),
    /// The namespaces of the intercom suite's `slack = "slack-hosts"` mode.
    #[command(hide = true, subcommand)]
    Netns(Netns),
}

#[derive(Debug, Subcommand)]
enum Netns {
    /// Make a user, mount and network namespace (HOSTS over /etc/hosts, loopback up), relay
    /// each --listen port of its loopback out through RELAY_DIR, print `netns ready`, and hold
    /// it until stdin closes.
    Hold {
        #[arg(long)]
        hosts: PathBuf,
        #[arg(long)]
        relay_dir: PathBuf,
        #[arg(long = "listen")]
        ports: Vec<u16>,
    },
    /// Join the namespaces of the holder PID and run COMMAND there.
    Enter {
        #[arg(long)]
        pid: u32,
        #[arg(last = true, required = true)]
        command: Vec<std::ffi::OsString>,
    },
}

#[derive(Debug, Subcommand)]
enum Fixture {
    /// Listen on ADDR, print `listening on ADDR`, accept and close connections until stdin
    /// closes; exit 98 with "address already in use" when ADDR is taken.
    TcpListen {
        /// The address to bind.
        addr: std::net::SocketAddr,
    },
    /// An intercom server that gets ready and answers every HTTP request with 500: print
    /// `{"mcp_url": …}` for a loopback port, then serve until a signal ends the process.
    HttpErrors,
    /// An ACP agent on stdio that answers every request with a JSON-RPC error (-32603) and
    /// passes over notifications, until stdin closes.
    AcpErrors,
}

#[derive(Debug, Args)]
struct CatalogArgs {
    /// Load catalogs from this directory instead of the ones built in.
    #[arg(long, value_name = "DIR")]
    catalog_dir: Option<PathBuf>,
}

impl CatalogArgs {
    fn load(&self) -> Result<CatalogSet> {
        match &self.catalog_dir {
            Some(dir) => Ok(CatalogSet::load_dir(dir)?),
            None => Ok(catalog::builtin()?),
        }
    }
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The target profile: a name from conformance/targets or a path to a .toml file
    /// [default: reference].
    #[arg(
        long,
        value_name = "PROFILE",
        conflicts_with_all = ["agent_cmd", "agent_url"],
        help_heading = "Target"
    )]
    target: Option<String>,
    /// Test this ACP agent command over stdio (builds an ad-hoc profile).
    #[arg(long, value_name = "CMD", help_heading = "Target")]
    agent_cmd: Option<String>,
    /// Test the ACP agent at this WebSocket URL (`ws://`), or at ACP's remote endpoint
    /// (`http://HOST:PORT/acp`, either profile) (builds an ad-hoc profile).
    #[arg(long, value_name = "URL", help_heading = "Target")]
    agent_url: Option<String>,
    /// A capability the ad-hoc target declares besides what discovery finds (repeatable).
    #[arg(long = "capability", value_name = "NAME", help_heading = "Target")]
    capabilities: Vec<String>,
    /// A capability the ad-hoc target does not declare even if discovery finds it (repeatable).
    #[arg(long = "no-capability", value_name = "NAME", help_heading = "Target")]
    no_capabilities: Vec<String>,
    /// Do not start the ad-hoc agent once to discover its capabilities; declare them all with
    /// --capability.
    #[arg(long, help_heading = "Target")]
    no_discover: bool,
    /// Run the ad-hoc agent with your HOME instead of a fresh one per scenario (`{home}`).
    #[arg(long, help_heading = "Target")]
    shared_home: bool,
    /// Authenticate every ACP connection with this advertised auth method after initialize
    /// (the key it reads comes from your environment); default: the profile's `auth`, else a
    /// method discovery finds that needs no person and whose key is set.
    #[arg(long, value_name = "ID", help_heading = "Target")]
    auth_method: Option<String>,
    /// The directory of the binaries under test; default: this binary's directory.
    #[arg(long, value_name = "DIR", help_heading = "Target")]
    bin_dir: Option<PathBuf>,
    /// Only these suites (repeatable); default: every suite the target has a section for.
    #[arg(long = "suite", value_name = "SUITE", help_heading = "Selection")]
    suites: Vec<String>,
    /// Only scenario IDs matching these globs (repeatable; `*`, `?`, `[...]`, `{a,b}`).
    #[arg(long = "id", value_name = "GLOB", help_heading = "Selection")]
    ids: Vec<Glob>,
    /// Only these categories (repeatable).
    #[arg(long = "category", value_name = "CATEGORY", help_heading = "Selection")]
    categories: Vec<Category>,
    /// Only shard i of n (1-based), split by a stable hash of the scenario ID.
    #[arg(long, value_name = "I/N", help_heading = "Selection")]
    shard: Option<Shard>,
    #[command(flatten, next_help_heading = "Selection")]
    catalog: CatalogArgs,
    /// Scenarios run at once; default: paced, from one per CPU up to four per CPU as the rows'
    /// measured CPU use allows (rows mostly wait).
    #[arg(long, short = 'j', value_name = "N", help_heading = "Execution")]
    jobs: Option<usize>,
    /// Multiply every timeout class (short 5 s, normal 20 s, long 60 s) by this.
    #[arg(
        long,
        value_name = "FACTOR",
        default_value_t = 1.0,
        env = "SKI_TIMEOUT_MULTIPLIER",
        help_heading = "Execution"
    )]
    timeout_multiplier: f64,
    /// Do not re-run unexpected failures alone.
    #[arg(long, help_heading = "Execution")]
    no_rerun: bool,
    /// Keep each scenario's temp dir (paths go into results.json).
    #[arg(long, help_heading = "Execution")]
    keep_temp: bool,
    /// A strict baseline of known failures (conformance/baselines/*.toml).
    #[arg(long, value_name = "FILE", help_heading = "Results")]
    baseline: Option<PathBuf>,
    /// Fail the run (exit 1) when fewer than P percent of the selected rows ran.
    #[arg(long, value_name = "P", help_heading = "Results")]
    min_coverage: Option<f64>,
    /// Fail the run on should and interop rows too; without it their failures are warnings
    /// ("passed, not strict"). Info rows never fail a run.
    #[arg(long, help_heading = "Results")]
    strict: bool,
    /// Where the reports go.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "target/conformance",
        help_heading = "Results"
    )]
    out: PathBuf,
    /// Do not print a line for each skipped scenario.
    #[arg(long, short = 'q', help_heading = "Results")]
    quiet: bool,
}

#[derive(Debug, Args)]
struct ListArgs {
    #[command(flatten)]
    catalog: CatalogArgs,
    /// Only these suites (repeatable).
    #[arg(long = "suite", value_name = "SUITE")]
    suites: Vec<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct MergeArgs {
    #[command(flatten)]
    catalog: CatalogArgs,
    /// The results.json files of the shards.
    #[arg(required = true, value_name = "RESULTS")]
    results: Vec<PathBuf>,
    /// Where the merged reports go.
    #[arg(long, value_name = "DIR", default_value = "target/conformance")]
    out: PathBuf,
    /// Fail (exit 1) when fewer than P percent of the merged rows ran.
    #[arg(long, value_name = "P")]
    min_coverage: Option<f64>,
}

#[derive(Debug, Args)]
struct ProbeArgs {
    /// The ACP agent command (stdio).
    #[arg(
        long,
        value_name = "CMD",
        required_unless_present = "agent_url",
        conflicts_with = "agent_url"
    )]
    agent_cmd: Option<String>,
    /// The ACP agent's WebSocket URL (`ws://`), or its remote endpoint (`http://HOST:PORT/acp`:
    /// the profile then says which of its profiles answer).
    #[arg(long, value_name = "URL")]
    agent_url: Option<String>,
    /// The profile's name.
    #[arg(long, default_value = "my-agent")]
    name: String,
    /// Authenticate with this advertised auth method after initialize (default: a method that
    /// needs no person and whose key is set); the profile then names it.
    #[arg(long, value_name = "ID")]
    auth_method: Option<String>,
}

#[derive(Debug, Args)]
struct BaselineArgs {
    /// The results.json of the run.
    #[arg(long = "from", value_name = "RESULTS")]
    from: PathBuf,
    /// Write the baseline here instead of to stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct ExplainArgs {
    #[command(flatten)]
    catalog: CatalogArgs,
    /// The scenario ID.
    id: String,
}

/// Parses the arguments (including the program name) and runs; returns the exit code.
pub fn main_with_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> u8 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
        }
    };
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", ski::exit::render(&e));
            EXIT_USAGE
        }
    }
}

fn dispatch(cli: Cli) -> Result<u8> {
    match cli.command {
        Command::Run(args) => run(*args),
        Command::List(args) => list(args),
        Command::Explain(args) => explain(args),
        Command::Merge(args) => merge(args),
        Command::Matrix(args) => crate::matrix::main(*args),
        Command::Baseline(args) => baseline(args),
        Command::Probe(args) => probe(args),
        Command::Fixture(fixture) => Ok(run_fixture(fixture)),
        Command::Netns(netns) => Ok(run_netns(netns)),
    }
}

/// Runs before any thread exists: a process with threads can neither make nor join a user
/// namespace.
fn run_netns(netns: Netns) -> u8 {
    use crate::suites::intercom::netns;
    let error = match netns {
        Netns::Hold {
            hosts,
            relay_dir,
            ports,
        } => match netns::hold(&hosts, &relay_dir, &ports) {
            Ok(()) => return EXIT_OK,
            Err(error) => error,
        },
        Netns::Enter { pid, command } => netns::enter(pid, &command),
    };
    eprintln!("ski-conformance netns: {error}");
    EXIT_UNEXPECTED
}

/// Every registered check, with its suite.
fn registry() -> Vec<SuiteChecks> {
    coverage::registered(&suites::all())
}

fn all_checks(registry: &[SuiteChecks]) -> Vec<Check> {
    registry
        .iter()
        .flat_map(|s| s.checks.iter().cloned())
        .collect()
}

/// Checks that `--agent-cmd` splits into words, before anything starts it.
fn check_agent_cmd(agent_cmd: Option<&str>) -> Result<()> {
    if let Some(cmd) = agent_cmd {
        split_words(cmd).map_err(|message| anyhow::anyhow!("--agent-cmd {cmd:?}: {message}"))?;
    }
    Ok(())
}

fn run(args: RunArgs) -> Result<u8> {
    check_agent_cmd(args.agent_cmd.as_deref())?;
    let catalogs = args.catalog.load()?;
    let registry = registry();
    let ad_hoc = args.agent_cmd.is_some() || args.agent_url.is_some();
    if !ad_hoc
        && (!args.capabilities.is_empty()
            || !args.no_capabilities.is_empty()
            || args.no_discover
            || args.shared_home)
    {
        bail!(
            "--capability, --no-capability, --no-discover and --shared-home only apply to an ad-hoc target (--agent-cmd or --agent-url)"
        );
    }
    // A slow-starting agent (Node agents take up to a second) must not fail rows by timeout:
    // discovery measures its start-up once for the run, and every set-up step's allowance grows
    // with it (the rows' own waits do not).
    let mut startup_scale = 1.0_f64;
    let mut setup = runner::RunSetup::default();
    // What discovery saw of the agent's set-up is the run's first measurement: an agent that
    // answered no initialize there gets the short set-up allowance in every row.
    let mut silent = false;
    let target = match (&args.target, &args.agent_cmd, &args.agent_url) {
        (Some(name), _, _) => Target::load(name)?,
        (None, None, None) => Target::load("reference")?,
        (None, cmd, url) => {
            let vocabulary = catalogs.capabilities("acp");
            for name in args.capabilities.iter().chain(&args.no_capabilities) {
                if !vocabulary.contains(name) {
                    bail!(
                        "--capability: {}; the acp suite knows: {}",
                        crate::catalog::unknown_capability(name, &vocabulary),
                        vocabulary.iter().cloned().collect::<Vec<_>>().join(", ")
                    );
                }
            }
            let mut capabilities: BTreeSet<String> = args.capabilities.iter().cloned().collect();
            let mut auth = args.auth_method.clone();
            if !args.no_discover {
                let asked = crate::discover::AuthOptions {
                    method: args.auth_method.clone(),
                    ..Default::default()
                };
                let found =
                    discover_blocking(cmd.as_deref(), url.as_deref(), !args.shared_home, &asked)?;
                auth = auth.or_else(|| found.auth.clone());
                setup = setup_of(&found);
                output::line(format_args!(
                    "discovered: {} (ski-conformance probe shows why)",
                    found
                        .capabilities
                        .iter()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                if let Some(choice) = &found.auth_choice {
                    output::line(format_args!("discovery: auth: {choice}"));
                }
                if let Some(versions) = &found.versions {
                    output::line(format_args!("discovery: protocol versions: {versions}"));
                }
                for problem in &found.problems {
                    output::line(format_args!("discovery: {problem}"));
                }
                startup_scale = startup_scale_for(found.startup);
                silent = answered_no_initialize(&found, &mut setup);
                capabilities.extend(found.capabilities);
            }
            for name in &args.no_capabilities {
                capabilities.remove(name);
            }
            let capabilities: Vec<String> = capabilities.into_iter().collect();
            let mut target = Target::ad_hoc(cmd.as_deref(), url.as_deref(), &capabilities)?;
            if let (Some(method), Some(section)) = (auth, target.suites.get_mut("acp")) {
                section.set_auth(crate::target::AuthSetting {
                    method,
                    ..Default::default()
                });
            }
            if args.shared_home {
                target.with_shared_home()
            } else {
                target
            }
        }
    };
    let target = with_auth_method(target, args.auth_method.as_deref());
    // A profile's own names are checked; an ad-hoc target's are the flags checked above and
    // what discovery found.
    let review = if ad_hoc {
        crate::vocabulary::Review::default()
    } else {
        crate::vocabulary::review(&target, &catalogs)
    };
    if !review.problems.is_empty() {
        bail!(
            "target profile {}: {}",
            target.name,
            review.problems.join("; ")
        );
    }
    for note in &review.notes {
        output::line(format_args!("note: {note}"));
    }
    let (target, profile_found) = discover_profile(target, &catalogs, args.bin_dir.as_deref())?;
    if let Some(auth) = target.suite("acp").and_then(|s| s.auth.as_ref()) {
        output::line(format_args!(
            "auth: every connection authenticates with method {:?} after initialize",
            auth.method
        ));
    }
    if let Some(found) = profile_found {
        startup_scale = startup_scale_for(found.startup);
        setup = setup_of(&found);
        silent = answered_no_initialize(&found, &mut setup);
    }
    // What the reports say of the target: its command or URL and how it authenticates.
    let target_shown = target.clone();
    let given = (args.agent_cmd.clone(), args.agent_url.clone());
    let auth_shown = target
        .suite("acp")
        .and_then(|s| s.auth.as_ref())
        .map(|auth| format!("method {:?}", auth.method));
    let gauge = crate::setup::SetupGauge::new().with_startup_scale(startup_scale);
    if silent {
        gauge.record(false);
    }
    setup.timeout_multiplier_asked = Some(args.timeout_multiplier);
    setup.profile_notes = review.notes;
    setup.startup_scale = Some(startup_scale);
    let registered: Vec<&str> = registry.iter().map(|s| s.name.as_str()).collect();
    let mut selection = Selection {
        suites: args.suites.clone(),
        ids: args.ids.clone(),
        categories: args.categories.clone(),
        shard: args.shard,
    };
    let unknown = selection.unknown_suites(&catalogs, &registered);
    if !unknown.is_empty() {
        bail!(
            "unknown suite(s) {} (known: {})",
            unknown.join(", "),
            catalogs
                .catalogs
                .iter()
                .map(|c| c.suite.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if selection.suites.is_empty() {
        selection.suites = catalogs
            .catalogs
            .iter()
            .map(|c| c.suite.clone())
            .filter(|s| target.suite(s).is_some())
            .collect();
        if selection.suites.is_empty() {
            bail!(
                "target {} has no section for any suite in the catalog; nothing to run",
                target.name
            );
        }
    }
    let baseline = match &args.baseline {
        Some(path) => {
            let baseline = Baseline::load(path)?;
            let unknown = baseline.unknown_ids(&catalogs);
            if !unknown.is_empty() {
                bail!(
                    "baseline {} lists scenarios that are in no catalog: {}",
                    path.display(),
                    unknown.join(", ")
                );
            }
            Some(baseline)
        }
        None => None,
    };
    let plan = Plan::new(&catalogs, all_checks(&registry), &selection)?;
    if plan.is_empty() {
        bail!(
            "the selection ({}) matches no scenario",
            selection.describe()
        );
    }
    let bin_dir = match args.bin_dir {
        Some(dir) => dir,
        None => default_bin_dir()?,
    };
    if !bin_dir.is_dir() {
        bail!("--bin-dir {} is not a directory", bin_dir.display());
    }
    if !(args.timeout_multiplier.is_finite() && args.timeout_multiplier > 0.0) {
        bail!("--timeout-multiplier must be a positive number");
    }
    check_min_coverage(args.min_coverage)?;
    let mut options = RunOptions {
        timeouts: Timeouts::new(args.timeout_multiplier),
        bin_dir,
        rerun: !args.no_rerun,
        keep_temp: args.keep_temp,
        ..RunOptions::default()
    };
    if let Some(jobs) = args.jobs {
        if jobs == 0 {
            bail!("--jobs must be at least 1");
        }
        options.jobs = jobs;
    } else {
        options.paced = true;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let console = Console::new().quiet(args.quiet).strict(args.strict);
    let mut report = runtime.block_on(async {
        let listener = options
            .interrupt
            .listen()
            .context("cannot listen for SIGINT and SIGTERM")?;
        let report = runner::run_with(
            plan,
            Arc::new(target),
            &options,
            baseline.as_ref(),
            &console,
            gauge,
        )
        .await;
        // A second signal from here on ends the process as the first would have (the rows are
        // over; what is left is writing the report).
        listener.abort();
        anyhow::Ok(report)
    })?;
    report.selection = selection.describe();
    report.min_coverage = args.min_coverage;
    let (command, url) = what_was_run(&target_shown, &selection.suites, given);
    setup.command = command;
    setup.url = url;
    if setup.auth.is_none() {
        setup.auth = auth_shown;
    }
    report.setup = setup;
    report.strict = args.strict;
    write_and_summarise(&report, &args.out)
}

/// Writes the reports into `out`, prints the summary, and gives the run's exit code.
fn write_and_summarise(report: &runner::RunReport, out: &std::path::Path) -> Result<u8> {
    let written = report::write_all(report, out)?;
    output::text(&report::console::summary(report));
    output::line(format_args!(
        "reports: {}, {}, {}",
        written.markdown.display(),
        written.junit.display(),
        written.json.display()
    ));
    Ok(report.exit_code())
}

fn merge(args: MergeArgs) -> Result<u8> {
    let catalogs = args.catalog.load()?;
    check_min_coverage(args.min_coverage)?;
    let mut reports = Vec::new();
    for path in &args.results {
        reports.push((path.clone(), crate::merge::load_results(path)?));
    }
    let mut report = crate::merge::merge(reports, &catalogs)?;
    if args.min_coverage.is_some() {
        report.min_coverage = args.min_coverage;
    }
    write_and_summarise(&report, &args.out)
}

fn baseline(args: BaselineArgs) -> Result<u8> {
    let report = crate::merge::load_results(&args.from)?;
    let text = crate::merge::draft_baseline(&report, &args.from.display().to_string());
    match &args.out {
        Some(path) => std::fs::write(path, &text)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => output::text(&text),
    }
    Ok(EXIT_OK)
}

/// A profile whose ACP connections authenticate with `method` (`--auth-method`), the
/// environment of its own `auth` kept.
fn with_auth_method(mut target: Target, method: Option<&str>) -> Target {
    if let (Some(method), Some(section)) = (method, target.suites.get_mut("acp")) {
        let env = section.auth.take().map(|a| a.env).unwrap_or_default();
        section.set_auth(crate::target::AuthSetting {
            method: method.to_owned(),
            env,
        });
    }
    target
}

/// Whether the agent answered no `initialize` in discovery (it timed out, not refused or
/// exited): every row's set-up steps then wait only the short allowance, and the reports say so.
fn answered_no_initialize(
    found: &crate::discover::Discovery,
    setup: &mut runner::RunSetup,
) -> bool {
    if !found.initialize_unanswered {
        return false;
    }
    let note = format!(
        "the agent answered no initialize in discovery: each row's set-up steps wait {:?} (scaled) for it, and its failures are not re-run",
        crate::setup::SILENT_ALLOWANCE
    );
    output::line(format_args!("discovery: {note}"));
    setup.discovery_notes.push(note);
    true
}

/// What discovery saw, for the reports.
fn setup_of(found: &crate::discover::Discovery) -> runner::RunSetup {
    runner::RunSetup {
        startup_seconds: Some((found.startup.as_secs_f64() * 1000.0).round() / 1000.0),
        discovered: found.capabilities.iter().cloned().collect(),
        discovery_notes: found.notes.clone(),
        agent: runner::AgentInfo::of_initialize(&found.initialize),
        auth: found.auth_choice.clone(),
        ..runner::RunSetup::default()
    }
}

/// The target's command and URL as the reports name them: `--agent-cmd` and `--agent-url` as
/// given, else the profile's ACP `agent` command and `ws` URL (templates, before placeholders
/// are filled in), else the first command of the first selected suite that has one.
fn what_was_run(
    target: &Target,
    suites: &[String],
    given: (Option<String>, Option<String>),
) -> (Option<String>, Option<String>) {
    if given.0.is_some() || given.1.is_some() {
        return given;
    }
    let template = |command: &crate::target::CommandTemplate| {
        command.words().ok().map(|words| words.join(" "))
    };
    let acp = target.suite("acp");
    let mut command = acp.and_then(|s| s.commands.get("agent")).and_then(template);
    let url = acp
        .and_then(|s| s.urls.get("ws").or_else(|| s.urls.get("http")))
        .cloned();
    if command.is_none() && url.is_none() {
        command = suites
            .iter()
            .filter_map(|name| target.suite(name))
            .find_map(|s| s.commands.values().next().and_then(template));
    }
    (command, url)
}

/// With `discover = true` in a profile's ACP section: starts its `agent` command once (rendered
/// as a check would) and adds what it shows to the section's capabilities, less
/// `exclude_capabilities`. Answers the target and how long the agent took to answer
/// `initialize` and what it saw. When the profile's prerequisites are missing
/// (`requires_programs`, `requires_files`) it says so and discovers nothing: the rows that start
/// the agent skip or report the missing install themselves.
fn discover_profile(
    mut target: Target,
    catalogs: &CatalogSet,
    bin_dir: Option<&std::path::Path>,
) -> Result<(Target, Option<crate::discover::Discovery>)> {
    let wants = target.suite("acp").is_some_and(|section| section.discover);
    if !wants {
        return Ok((target, None));
    }
    let scenario = catalogs
        .suite("acp")
        .and_then(|catalog| catalog.scenarios.first())
        .cloned()
        .context("discover = true needs the acp catalog")?;
    let temp = tempfile::tempdir().context("cannot create a temp dir for discovery")?;
    let bin_dir = match bin_dir {
        Some(dir) => dir.to_owned(),
        None => default_bin_dir()?,
    };
    let ctx = crate::Ctx::new(crate::CtxParts {
        scenario,
        target: Arc::new(target.clone()),
        temp_dir: temp.path().to_owned(),
        bin_dir,
        timeouts: Timeouts::new(1.0),
        setup: crate::setup::SetupGauge::new(),
    });
    if let Err(missing) = crate::suites::acp::agent::prerequisites(&ctx) {
        output::line(format_args!("discovery skipped: {missing}"));
        return Ok((target, None));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // The fake model the profile asks for answers the probe turn too.
    let model = runtime
        .block_on(crate::suites::acp::model::prepare(&ctx, ""))
        .map_err(|e| anyhow::anyhow!("discover = true: {e}"))?;
    let extra: Vec<(&str, &str)> = model
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut spec = ctx
        .command("agent", &extra)
        .map_err(|e| anyhow::anyhow!("discover = true: {e}"))?;
    if spec.get_cwd().is_none() {
        spec = spec.cwd(temp.path());
    }
    let asked = target
        .suite("acp")
        .map(|section| crate::discover::AuthOptions {
            method: section.auth.as_ref().map(|a| a.method.clone()),
            env: crate::suites::acp::model::env_with_model(section),
        })
        .unwrap_or_default();
    let mut found = runtime
        .block_on(crate::discover::stdio_spec(spec, &asked))
        .context("discovering the profile's agent failed (set discover = false and declare its capabilities)")?;
    if let Some(said) = target
        .suite("acp")
        .and_then(crate::suites::acp::model::describe)
    {
        output::line(format_args!("discovery: {said}"));
        found.notes.push(said);
    }
    output::line(format_args!(
        "discovered: {} (ski-conformance probe shows why)",
        found
            .capabilities
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if let Some(choice) = &found.auth_choice {
        output::line(format_args!("discovery: auth: {choice}"));
    }
    if let Some(versions) = &found.versions {
        output::line(format_args!("discovery: protocol versions: {versions}"));
    }
    for problem in &found.problems {
        output::line(format_args!("discovery: {problem}"));
    }
    if let Some(section) = target.suites.get_mut("acp") {
        if let (None, Some(method)) = (&section.auth, &found.auth) {
            section.set_auth(crate::target::AuthSetting {
                method: method.clone(),
                ..Default::default()
            });
        }
        let excluded = section.exclude_capabilities.clone();
        section.capabilities.extend(
            found
                .capabilities
                .iter()
                .filter(|c| !excluded.contains(*c))
                .cloned(),
        );
    }
    Ok((target, Some(found)))
}

/// The directory of this binary: where `{bin_dir}` points by default.
fn default_bin_dir() -> Result<PathBuf> {
    std::env::current_exe()
        .context("cannot locate this binary to default --bin-dir")?
        .parent()
        .map(PathBuf::from)
        .context("this binary has no parent directory; pass --bin-dir")
}

/// The most that a slow start scales each set-up step's allowance by.
const MAX_STARTUP_SCALE: f64 = 6.0;

/// How much to scale each set-up step's allowance for an agent that took `startup` to get ready
/// (initialize, or session/new when that is slower): not at all up to a quarter second, then one
/// more time the allowance for each further half second (a one-second start gets 2.5 times the
/// time), at most [`MAX_STARTUP_SCALE`]. Says so when it scales.
fn startup_scale_for(startup: std::time::Duration) -> f64 {
    let seconds = startup.as_secs_f64();
    if seconds <= 0.25 {
        return 1.0;
    }
    // Capped: an agent that never answers must not keep a row waiting for minutes.
    let scale = (1.0 + (seconds - 0.25) * 2.0).min(MAX_STARTUP_SCALE);
    output::line(format_args!(
        "the agent took {seconds:.2} s to get ready (initialize, session/new): each set-up step's allowance is scaled by {scale:.1}"
    ));
    scale
}

/// Discovers an ad-hoc agent on a runtime of its own.
fn discover_blocking(
    agent_cmd: Option<&str>,
    agent_url: Option<&str>,
    own_home: bool,
    auth: &crate::discover::AuthOptions,
) -> Result<crate::discover::Discovery> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let found = runtime.block_on(async {
        match (agent_cmd, agent_url) {
            (Some(cmd), _) => crate::discover::stdio(cmd, own_home, auth).await,
            (None, Some(url)) if crate::discover::is_remote_url(url) => {
                crate::discover::remote(url, auth).await
            }
            (None, Some(url)) => crate::discover::websocket(url, auth).await,
            (None, None) => Err(crate::discover::DiscoverError::NoAgent),
        }
    });
    found.context("discovering the agent's capabilities failed (--no-discover and --capability declare them by hand)")
}

fn probe(args: ProbeArgs) -> Result<u8> {
    check_agent_cmd(args.agent_cmd.as_deref())?;
    let asked = crate::discover::AuthOptions {
        method: args.auth_method.clone(),
        ..Default::default()
    };
    let mut found = discover_blocking(
        args.agent_cmd.as_deref(),
        args.agent_url.as_deref(),
        true,
        &asked,
    )?;
    found.auth = args.auth_method.clone().or(found.auth);
    output::line(format_args!(
        "{}",
        crate::discover::profile_toml(
            &args.name,
            args.agent_cmd.as_deref(),
            args.agent_url.as_deref(),
            &found
        )
    ));
    Ok(EXIT_OK)
}

fn check_min_coverage(min: Option<f64>) -> Result<()> {
    if let Some(min) = min
        && !(0.0..=100.0).contains(&min)
    {
        bail!("--min-coverage must be a percentage from 0 to 100");
    }
    Ok(())
}

fn list(args: ListArgs) -> Result<u8> {
    let catalogs = args.catalog.load()?;
    let wanted = |suite: &str| args.suites.is_empty() || args.suites.iter().any(|s| s == suite);
    let unknown: Vec<&String> = args
        .suites
        .iter()
        .filter(|s| catalogs.suite(s).is_none())
        .collect();
    if !unknown.is_empty() {
        bail!("no catalog for suite(s) {unknown:?}");
    }
    let registry = registry();
    let checks = all_checks(&registry);
    let has_check = |id: &str| checks.iter().any(|c| c.id() == id);
    if args.json {
        let selected: Vec<_> = catalogs
            .catalogs
            .iter()
            .filter(|c| wanted(&c.suite))
            .collect();
        emit(&format!("{}\n", serde_json::to_string_pretty(&selected)?))?;
        return Ok(EXIT_OK);
    }
    let mut text = String::new();
    for catalog in catalogs.catalogs.iter().filter(|c| wanted(&c.suite)) {
        text.push_str(&format!(
            "suite {} ({}, {} scenarios)\n",
            catalog.suite,
            catalog.document,
            catalog.scenarios.len()
        ));
        for s in &catalog.scenarios {
            text.push_str(&format!(
                "  {:<12} {:<11} {:<10} {:<6} {}{}{}\n",
                s.id,
                s.category.as_str(),
                s.level.as_str(),
                s.timeout.as_str(),
                s.title,
                if s.requires.is_empty() {
                    String::new()
                } else {
                    format!(" [requires {}]", s.requires.join(", "))
                },
                if has_check(&s.id) {
                    ""
                } else {
                    " (no check yet)"
                }
            ));
        }
    }
    emit(&text)?;
    Ok(EXIT_OK)
}

/// Writes `text` to stdout; a reader that went away (`| head`) is not an error.
fn emit(text: &str) -> Result<()> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        result => Ok(result?),
    }
}

fn explain(args: ExplainArgs) -> Result<u8> {
    let catalogs = args.catalog.load()?;
    let Some(s) = catalogs.find(&args.id) else {
        bail!("no scenario {} in any catalog", args.id);
    };
    let registry = registry();
    let check = all_checks(&registry).into_iter().find(|c| c.id() == s.id);
    output::line(format_args!("{} — {}", s.id, s.title));
    output::line(format_args!("suite:    {}", s.suite));
    output::line(format_args!("category: {}", s.category));
    output::line(format_args!("level:    {}", s.level));
    output::line(format_args!(
        "timeout:  {} ({:?} unscaled)",
        s.timeout.as_str(),
        s.timeout.base()
    ));
    output::line(format_args!("source:   {}", s.source));
    if let Some(cites) = &s.cites {
        output::line(format_args!("cites:    {cites}"));
    }
    if !s.requires.is_empty() {
        output::line(format_args!("requires: {}", s.requires.join(", ")));
    }
    if !s.errata.is_empty() {
        output::line(format_args!(
            "errata:   {} (see conformance/ERRATA.md)",
            s.errata.join(", ")
        ));
    }
    output::line(format_args!(
        "\nGiven {}\nWhen {}\nThen {}",
        s.given, s.when, s.then
    ));
    if let Some(original) = &s.then_original {
        output::line(format_args!("(the document's words: {original})"));
    }
    match check {
        Some(check) => output::line(format_args!("\nHow it is checked: {}", check.how())),
        None => output::line(format_args!(
            "\nNo check is registered for this scenario yet."
        )),
    }
    Ok(EXIT_OK)
}

fn run_fixture(fixture: Fixture) -> u8 {
    match fixture {
        Fixture::TcpListen { addr } => {
            let listener = match std::net::TcpListener::bind(addr) {
                Ok(listener) => listener,
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                    eprintln!("error: address already in use: {addr}");
                    return 98;
                }
                Err(e) => {
                    eprintln!("error: cannot bind {addr}: {e}");
                    return EXIT_USAGE;
                }
            };
            output::line(format_args!("listening on {addr}"));
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    drop(stream);
                }
            });
            // Serve until stdin reaches its end (or a signal ends the process).
            let mut sink = String::new();
            while std::io::stdin().read_line(&mut sink).is_ok_and(|n| n > 0) {
                sink.clear();
            }
            EXIT_OK
        }
        Fixture::HttpErrors => serve_http_errors(),
        Fixture::AcpErrors => answer_acp_errors(),
    }
}

/// [`Fixture::AcpErrors`]: every JSON-RPC request on stdin, whatever it asks, gets -32603.
fn answer_acp_errors() -> u8 {
    use std::io::{BufRead, Write};
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let (Some(id), Some(_)) = (message.get("id"), message.get("method")) else {
            continue;
        };
        let answer = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": -32603, "message": "Internal error"},
        });
        if writeln!(stdout, "{answer}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            break;
        }
    }
    EXIT_OK
}

/// [`Fixture::HttpErrors`]: every request, whatever it asks, gets `500 Internal Server Error`.
fn serve_http_errors() -> u8 {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = match std::net::TcpListener::bind("127.0.0.1:0") {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("error: cannot bind a loopback port: {e}");
            return EXIT_USAGE;
        }
    };
    let Ok(addr) = listener.local_addr() else {
        return EXIT_USAGE;
    };
    output::line(format_args!("{{\"mcp_url\":\"http://{addr}/mcp\"}}"));
    for stream in listener.incoming().flatten() {
        std::thread::spawn(move || {
            let Ok(reader_half) = stream.try_clone() else {
                return;
            };
            let mut reader = BufReader::new(reader_half);
            let mut writer = stream;
            loop {
                let mut length = 0usize;
                let mut line = String::new();
                if reader.read_line(&mut line).map_or(true, |n| n == 0) {
                    return;
                }
                loop {
                    line.clear();
                    if reader.read_line(&mut line).map_or(true, |n| n == 0) {
                        return;
                    }
                    let header = line.trim_end();
                    if header.is_empty() {
                        break;
                    }
                    if let Some((name, value)) = header.split_once(':')
                        && name.eq_ignore_ascii_case("content-length")
                    {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0u8; length.min(1 << 20)];
                if reader.read_exact(&mut body).is_err() {
                    return;
                }
                let answer = b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ncontent-length: 14\r\n\r\ninternal error";
                if writer.write_all(answer).is_err() {
                    return;
                }
            }
        });
    }
    EXIT_OK
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::CommandFactory;

    use super::{Cli, startup_scale_for};
    use crate::target::Target;

    #[test]
    fn error_messages_name_each_cause_once() {
        let missing = Target::load("/nonexistent/ski/none.toml").unwrap_err();
        let message = ski::exit::render(&anyhow::Error::new(missing));
        assert!(
            message.starts_with("cannot read target profile /nonexistent/ski/none.toml: "),
            "{message}"
        );
        let os = std::fs::read("/nonexistent/ski/none.toml")
            .unwrap_err()
            .to_string();
        assert_eq!(message.matches(&os).count(), 1, "{message}");

        /// An error that both writes its source into its message and exposes it.
        #[derive(Debug, thiserror::Error)]
        #[error("outer: {source}")]
        struct Twice {
            #[source]
            source: std::io::Error,
        }
        let twice = anyhow::Error::new(Twice {
            source: std::io::Error::other("the cause"),
        })
        .context("doing it");
        assert_eq!(ski::exit::render(&twice), "doing it: outer: the cause");
    }

    #[test]
    fn every_subcommand_help_has_examples_and_run_groups_its_flags() {
        let mut cli = Cli::command();
        cli.build();
        assert!(cli.render_long_help().to_string().contains("Examples:"));
        for sub in cli.get_subcommands_mut().filter(|s| !s.is_hide_set()) {
            let name = sub.get_name().to_owned();
            if name == "help" {
                continue;
            }
            let help = sub.render_long_help().to_string();
            assert!(help.contains("Examples:"), "{name} --help:\n{help}");
            if name == "run" {
                for heading in ["Target:", "Selection:", "Execution:", "Results:"] {
                    assert!(help.contains(heading), "{heading}\n{help}");
                }
            }
        }
    }

    #[test]
    fn slow_starting_agents_get_longer_timeouts() {
        assert_eq!(startup_scale_for(Duration::from_millis(10)), 1.0);
        assert_eq!(startup_scale_for(Duration::from_millis(250)), 1.0);
        assert!((startup_scale_for(Duration::from_secs(1)) - 2.5).abs() < 1e-9);
        assert!(
            startup_scale_for(Duration::from_secs(3)) > startup_scale_for(Duration::from_secs(1))
        );
    }
}
