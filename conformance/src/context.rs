//! The context a check runs in: its scenario, the target profile, an owned temp dir, the wire log,
//! process spawning, loopback ports, timeouts and the row's budget (its timeout class plus one
//! allowance per set-up step, see [`crate::setup`]).
//!
//! A [`Ctx`] is a cheap handle; clone it freely, move it into tasks. The runner keeps its own
//! handle, so whatever a check leaves behind (a process, a temp file) is cleaned up after the check
//! returns, fails, panics or times out.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ski::transport::WireLog;
use ski::transport::child::{self, Child, ChildSpec, ProcessTracker, Termination};
use tokio::net::TcpListener;
use tokio::time::Instant;

use crate::catalog::{Scenario, TimeoutClass};
use crate::check::{CheckError, Failure};
use crate::port::{PortAllocator, PortAttempt, StartError, says_addr_in_use};
use crate::setup::{Granted, SetupGauge};
use crate::target::{CommandTemplate, Readiness, SuiteTarget, Target, join_words, render};
use crate::vocabulary::{Capability, Setting};

/// The name of the wire-log channel for harness notes.
pub const HARNESS_CHANNEL: &str = "harness";

/// Timeout classes scaled by the run's multiplier.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timeouts {
    multiplier: f64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self { multiplier: 1.0 }
    }
}

impl Timeouts {
    /// Timeouts scaled by `multiplier` (values that are not finite and positive mean 1).
    pub fn new(multiplier: f64) -> Self {
        let multiplier = if multiplier.is_finite() && multiplier > 0.0 {
            multiplier
        } else {
            1.0
        };
        Self { multiplier }
    }

    /// The multiplier.
    pub fn multiplier(&self) -> f64 {
        self.multiplier
    }

    /// The scaled duration of a class.
    pub fn of(&self, class: TimeoutClass) -> Duration {
        self.scale(class.base())
    }

    /// Any duration scaled by the multiplier.
    pub fn scale(&self, duration: Duration) -> Duration {
        duration.mul_f64(self.multiplier)
    }
}

/// A server started by [`Ctx::spawn_listening`].
#[derive(Debug)]
pub struct Listening {
    /// The process.
    pub child: Child,
    /// The address it listens on.
    pub addr: SocketAddr,
    /// Every address tried, the successful one last.
    pub attempts: Vec<PortAttempt>,
}

struct Inner {
    scenario: Scenario,
    target: Arc<Target>,
    section: SuiteTarget,
    temp_dir: PathBuf,
    bin_dir: PathBuf,
    wire: WireLog,
    tracker: ProcessTracker,
    timeouts: Timeouts,
    ports: PortAllocator,
    started: Instant,
    setup: SetupGauge,
    granted: Mutex<Granted>,
    /// Whether the check rendered one of the target's commands or URLs: only then do its set-up
    /// steps say anything about the target (a row may run a stand-in of its own instead).
    reached_target: AtomicBool,
    /// The fake models started for this scenario's agents (`[suites.acp.model]`), each with what
    /// it was started for; they stop when the context goes, their requests logged at teardown.
    models: Mutex<Vec<(String, Arc<ski_mocks::model::FakeModel>)>>,
}

/// Everything the runner gives a check. See the module docs.
#[derive(Clone)]
pub struct Ctx {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("scenario", &self.inner.scenario.id)
            .field("target", &self.inner.target.name)
            .field("temp_dir", &self.inner.temp_dir)
            .finish_non_exhaustive()
    }
}

/// What the runner needs to build a context.
#[derive(Debug, Clone)]
pub struct CtxParts {
    /// The scenario being checked.
    pub scenario: Scenario,
    /// The target profile.
    pub target: Arc<Target>,
    /// The scenario's own temp dir (existing, owned by the runner).
    pub temp_dir: PathBuf,
    /// Where the binaries under test are.
    pub bin_dir: PathBuf,
    /// The run's timeouts.
    pub timeouts: Timeouts,
    /// What the run has seen of the target's set-up steps (shared by every row of a run).
    pub setup: SetupGauge,
}

impl Ctx {
    /// Builds a context; the wire log and process tracker start empty.
    pub fn new(parts: CtxParts) -> Self {
        let section = parts
            .target
            .suite(&parts.scenario.suite)
            .cloned()
            .unwrap_or_default();
        Self {
            inner: Arc::new(Inner {
                scenario: parts.scenario,
                target: parts.target,
                section,
                temp_dir: parts.temp_dir,
                bin_dir: parts.bin_dir,
                wire: WireLog::new(),
                tracker: ProcessTracker::new(),
                timeouts: parts.timeouts,
                ports: PortAllocator::loopback(),
                started: Instant::now(),
                setup: parts.setup,
                granted: Mutex::new(Granted::default()),
                reached_target: AtomicBool::new(false),
                models: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The scenario (its catalog row).
    pub fn scenario(&self) -> &Scenario {
        &self.inner.scenario
    }

    /// The scenario ID.
    pub fn id(&self) -> &str {
        &self.inner.scenario.id
    }

    /// The whole target profile.
    pub fn target(&self) -> &Target {
        &self.inner.target
    }

    /// The target's section for this scenario's suite (empty if the profile has none).
    pub fn section(&self) -> &SuiteTarget {
        &self.inner.section
    }

    /// Whether the target declares a capability for this suite.
    pub fn has(&self, capability: Capability) -> bool {
        self.inner.section.capabilities.contains(capability.name())
    }

    /// Skips the check unless the target declares `capability`.
    pub fn require(&self, capability: Capability) -> Result<(), CheckError> {
        if self.has(capability) {
            Ok(())
        } else {
            Err(CheckError::Undeclared {
                target: self.inner.target.name.clone(),
                capability: capability.name().to_owned(),
            })
        }
    }

    /// The scenario's text override `key` from the profile, or `default`.
    ///
    /// Use it wherever a check compares wording a build may phrase differently.
    pub fn text(&self, key: &str, default: &str) -> String {
        self.inner
            .section
            .overrides
            .get(&self.inner.scenario.id)
            .and_then(|texts| texts.get(key))
            .cloned()
            .unwrap_or_else(|| default.to_owned())
    }

    /// The scenario's own temp dir, removed after the check.
    pub fn temp_dir(&self) -> &Path {
        &self.inner.temp_dir
    }

    /// `{temp_dir}/data`, created on first use.
    pub fn data_dir(&self) -> Result<PathBuf, CheckError> {
        let dir = self.inner.temp_dir.join("data");
        std::fs::create_dir_all(&dir)
            .map_err(|e| CheckError::Harness(format!("cannot create {}: {e}", dir.display())))?;
        Ok(dir)
    }

    /// The directory of the binaries under test.
    pub fn bin_dir(&self) -> &Path {
        &self.inner.bin_dir
    }

    /// The path of a helper binary built with the project (for example `ski-mock-agent`).
    pub fn bin(&self, name: &str) -> PathBuf {
        self.inner.bin_dir.join(name)
    }

    /// The wire log every channel of this scenario records into.
    pub fn wire(&self) -> &WireLog {
        &self.inner.wire
    }

    /// What the run has seen of its target's set-up steps and refusals (shared by every row).
    pub fn setup_gauge(&self) -> &SetupGauge {
        &self.inner.setup
    }

    /// Records a harness note in the wire log.
    pub fn note(&self, text: impl AsRef<str>) {
        self.inner.wire.note(HARNESS_CHANNEL, text.as_ref());
    }

    /// The tracker of every process this scenario started.
    pub fn tracker(&self) -> &ProcessTracker {
        &self.inner.tracker
    }

    /// The run's timeouts.
    pub fn timeouts(&self) -> Timeouts {
        self.inner.timeouts
    }

    /// This scenario's timeout (its class, scaled).
    pub fn timeout(&self) -> Duration {
        self.inner.timeouts.of(self.inner.scenario.timeout)
    }

    /// This row's budget: its timeout class (scaled) plus one allowance for each set-up step it
    /// has taken so far; it only grows.
    pub fn budget(&self) -> Duration {
        self.timeout() + self.granted().time
    }

    /// When this row's budget runs out, counted from the start of its check.
    pub fn deadline(&self) -> Instant {
        self.inner.started + self.budget()
    }

    /// The set-up steps this row has taken and the time they added to its budget.
    pub fn granted(&self) -> Granted {
        *self
            .inner
            .granted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts a set-up step (the target becoming ready, `initialize`, `session/new`): adds one
    /// allowance to the row's budget and answers how long the step may take (scaled; short once
    /// the run's target has answered no set-up step at all). Report how it ended with
    /// [`Ctx::setup_ended`].
    pub fn setup_step(&self) -> Duration {
        self.setup_step_of(None)
    }

    /// [`Ctx::setup_step`] for a step of a named `kind`: short as well once the run has seen
    /// that kind of step run out and never done ([`crate::setup::SetupGauge::allowance_of`]).
    fn setup_step_of(&self, kind: Option<&str>) -> Duration {
        let allowance = match kind {
            Some(kind) => self.inner.setup.allowance_of(kind),
            None => self.inner.setup.allowance(),
        };
        let allowance = self.inner.timeouts.scale(allowance);
        let mut granted = self
            .inner
            .granted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        granted.steps += 1;
        granted.time += allowance;
        allowance
    }

    /// Records how a set-up step ended: the target did something in time (answered, even with
    /// an error, or exited), or the step ran out its allowance. A row that has reached none of
    /// the target's commands or URLs (it runs a stand-in of its own) records nothing.
    pub fn setup_ended(&self, answered: bool) {
        if self.inner.reached_target.load(Ordering::Relaxed) {
            self.inner.setup.record(answered);
        }
    }

    /// Runs `fut` as one set-up step (see [`Ctx::setup_step`]): when the target has done nothing
    /// by the step's allowance, the check fails with "`what` within ..." as Expected, at once
    /// rather than at the end of the row's budget.
    pub async fn setup<T>(
        &self,
        what: &str,
        fut: impl Future<Output = T>,
    ) -> Result<T, CheckError> {
        self.setup_of(None, what, fut).await
    }

    /// [`Ctx::setup`] for a step of a named `kind` as well (the target's Socket Mode connection):
    /// once the run has seen this kind of step run out and never done, the next ones get the
    /// short allowance, whatever other steps the target answers.
    pub async fn setup_of<T>(
        &self,
        kind: Option<&str>,
        what: &str,
        fut: impl Future<Output = T>,
    ) -> Result<T, CheckError> {
        let allowance = self.setup_step_of(kind);
        let result = limit_to(allowance, what, fut).await;
        if self.inner.reached_target.load(Ordering::Relaxed) {
            match kind {
                Some(kind) => self.inner.setup.record_of(kind, result.is_ok()),
                None => self.inner.setup.record(result.is_ok()),
            }
        }
        result.map_err(|error| match error {
            CheckError::Fail(failure) => {
                let actual = if self.inner.setup.silent() {
                    format!(
                        "{}; the target has answered no set-up step in this run",
                        failure.actual
                    )
                } else {
                    failure.actual.clone()
                };
                Failure::new(
                    failure.check.clone(),
                    format!("{what} within {allowance:?} (a set-up step's allowance)"),
                )
                .actual(actual)
                .at_deadline()
                .into()
            }
            other => other,
        })
    }

    /// Runs `fut` for at most this scenario's timeout; on expiry the check fails with
    /// "`what` within ..." as Expected.
    pub async fn within<T>(
        &self,
        what: &str,
        fut: impl Future<Output = T>,
    ) -> Result<T, CheckError> {
        limit_to(self.timeout(), what, fut).await
    }

    /// Runs `fut` for at most `limit` times the timeout multiplier; on expiry the check fails.
    pub async fn within_for<T>(
        &self,
        limit: Duration,
        what: &str,
        fut: impl Future<Output = T>,
    ) -> Result<T, CheckError> {
        limit_to(self.inner.timeouts.scale(limit), what, fut).await
    }

    /// `duration` times the timeout multiplier.
    pub fn scaled(&self, duration: Duration) -> Duration {
        self.inner.timeouts.scale(duration)
    }

    /// Runs `fut`, a wait for something the target does by a time the row derives from what it
    /// gave the target (a threshold, a schedule), for at most `limit` times the timeout
    /// multiplier. On expiry the check fails with the observation "nothing by then": the limit
    /// already holds room for contention, so unlike [`Ctx::within`] the failure is not a
    /// deadline a re-run could clear.
    pub async fn observe_for<T>(
        &self,
        limit: Duration,
        what: &str,
        fut: impl Future<Output = Result<T, CheckError>>,
    ) -> Result<T, CheckError> {
        let limit = self.scaled(limit);
        match tokio::time::timeout(limit, fut).await {
            Ok(result) => result,
            Err(_) => Err(nothing_within(limit, what).into()),
        }
    }

    /// The placeholder values of this scenario, plus `extra`.
    pub fn vars(&self, extra: &[(&str, &str)]) -> Result<BTreeMap<String, String>, CheckError> {
        let mut vars = BTreeMap::new();
        let temp = self.inner.temp_dir.display().to_string();
        vars.insert("bin_dir".into(), self.inner.bin_dir.display().to_string());
        vars.insert("data_dir".into(), format!("{temp}/data"));
        let home = self.inner.temp_dir.join("home");
        std::fs::create_dir_all(&home)
            .map_err(|e| CheckError::harness(format!("cannot create {}: {e}", home.display())))?;
        vars.insert("home".into(), home.display().to_string());
        vars.insert("temp_dir".into(), temp);
        vars.insert("scenario".into(), self.inner.scenario.id.clone());
        vars.insert("suite".into(), self.inner.scenario.suite.clone());
        for (key, value) in extra {
            vars.insert((*key).to_owned(), (*value).to_owned());
        }
        // Custom placeholders may use the built-in ones.
        let mut custom = BTreeMap::new();
        for (key, value) in &self.inner.target.vars {
            custom.insert(
                key.clone(),
                render(value, &vars).map_err(CheckError::harness)?,
            );
        }
        vars.extend(custom);
        if !vars.contains_key("agent_cmd")
            && let Some(agent) = self.inner.section.commands.get("agent")
        {
            let words = render_words(agent, &vars)?;
            vars.insert("agent_cmd".into(), join_words(&words));
        }
        Ok(vars)
    }

    /// A profile template (URL, setting) rendered with this scenario's placeholders.
    pub fn render(&self, template: &str, extra: &[(&str, &str)]) -> Result<String, CheckError> {
        render(template, &self.vars(extra)?).map_err(CheckError::harness)
    }

    /// The target's URL `name` (for example `ws`), rendered.
    pub fn url(&self, name: &str) -> Result<Option<String>, CheckError> {
        match self.inner.section.urls.get(name) {
            Some(url) => {
                self.inner.reached_target.store(true, Ordering::Relaxed);
                self.render(url, &[]).map(Some)
            }
            None => Ok(None),
        }
    }

    /// The target's setting, rendered (its value was checked against the setting's kind when
    /// the profile was reviewed, [`crate::vocabulary::review`]).
    pub fn setting(&self, setting: &Setting) -> Result<Option<String>, CheckError> {
        match self.inner.section.settings.get(setting.name) {
            Some(value) => self.render(value, &[]).map(Some),
            None => Ok(None),
        }
    }

    /// The target's command `name` rendered into a spec (environment: profile, suite, command;
    /// working directory: the command's `cwd` or the temp dir). Not started yet.
    pub fn command(&self, name: &str, extra: &[(&str, &str)]) -> Result<ChildSpec, CheckError> {
        let template = self.inner.section.commands.get(name).ok_or_else(|| {
            CheckError::Harness(format!(
                "target {} declares no command {name:?} for suite {}",
                self.inner.target.name, self.inner.scenario.suite
            ))
        })?;
        self.inner.reached_target.store(true, Ordering::Relaxed);
        let vars = self.vars(extra)?;
        let words = render_words(template, &vars)?;
        let mut spec = ChildSpec::from_argv(name, &words)
            .ok_or_else(|| CheckError::Harness(format!("command {name:?} is empty")))?;
        let env = self
            .inner
            .target
            .env
            .iter()
            .chain(self.inner.section.env.iter())
            .chain(
                self.inner
                    .section
                    .model
                    .iter()
                    .filter(|_| vars.contains_key("model_key"))
                    .flat_map(|model| model.env.iter()),
            )
            .map(|(k, v)| (k.clone(), v.clone()))
            .chain(template.env());
        for (key, value) in env {
            let value = render(&value, &vars).map_err(CheckError::harness)?;
            spec = spec.env(key, value);
        }
        if let Some(cwd) = template.cwd() {
            spec = spec.cwd(render(cwd, &vars).map_err(CheckError::harness)?);
        }
        Ok(spec)
    }

    /// Starts a process through the one spawning function, recording into this scenario's wire
    /// log and tracker. The working directory defaults to the temp dir.
    pub fn spawn(&self, spec: ChildSpec) -> Result<Child, CheckError> {
        let mut spec = spec
            .wire_log(self.inner.wire.clone())
            .tracker(self.inner.tracker.clone())
            .grace(self.inner.timeouts.scale(Duration::from_secs(2)));
        if spec.get_cwd().is_none() {
            spec = spec.cwd(&self.inner.temp_dir);
        }
        child::spawn(spec).map_err(|e| CheckError::Harness(e.to_string()))
    }

    /// Renders and starts the target's command `name`.
    pub fn spawn_target(&self, name: &str, extra: &[(&str, &str)]) -> Result<Child, CheckError> {
        let spec = self.command(name, extra)?;
        self.spawn(spec)
    }

    /// Binds a loopback listener on a port chosen by the system; the address is ready at once.
    pub async fn bind_loopback(&self) -> Result<TcpListener, CheckError> {
        let (listener, _) = self.inner.ports.bind(None).await?;
        Ok(listener)
    }

    /// The port allocator (for checks that manage addresses themselves).
    pub fn ports(&self) -> PortAllocator {
        self.inner.ports
    }

    /// Starts the target's listening command `name` on a free loopback address and waits until
    /// it is ready (the command's `ready` rule, or a TCP connection succeeds).
    ///
    /// The command receives `{listen}`, `{host}` and `{port}`. When it exits saying its address
    /// is in use, a new port is tried (up to the allocator's attempts). `preferred` is tried
    /// first. A start that fails otherwise is the target's failure.
    pub async fn spawn_listening(
        &self,
        name: &str,
        extra: &[(&str, &str)],
        preferred: Option<u16>,
    ) -> Result<Listening, CheckError> {
        let readiness = self
            .inner
            .section
            .commands
            .get(name)
            .and_then(CommandTemplate::ready)
            .cloned()
            .unwrap_or(Readiness::Connect);
        let result = self
            .inner
            .ports
            .start(preferred, |addr| {
                let readiness = readiness.clone();
                async move { self.start_on(name, extra, addr, &readiness).await }
            })
            .await;
        match result {
            Ok(started) => {
                self.note(format!(
                    "{name} listening on {} after {} attempt(s)",
                    started.addr,
                    started.attempts.len()
                ));
                Ok(Listening {
                    child: started.value,
                    addr: started.addr,
                    attempts: started.attempts,
                })
            }
            Err((StartError::Other(e), _)) => Err(e),
            Err((StartError::AddrInUse(detail), attempts)) => Err(CheckError::Harness(format!(
                "{name} could not get a free port: {detail} ({} attempts)",
                attempts.len()
            ))),
        }
    }

    async fn start_on(
        &self,
        name: &str,
        extra: &[(&str, &str)],
        addr: SocketAddr,
        readiness: &Readiness,
    ) -> Result<Child, StartError<CheckError>> {
        let listen = addr.to_string();
        let host = addr.ip().to_string();
        let port = addr.port().to_string();
        let mut vars: Vec<(&str, &str)> = vec![
            ("listen", listen.as_str()),
            ("host", host.as_str()),
            ("port", port.as_str()),
        ];
        vars.extend_from_slice(extra);
        let mut child = self.spawn_target(name, &vars).map_err(StartError::Other)?;
        let waited =
            tokio::time::timeout(self.timeout(), wait_ready(&mut child, addr, readiness)).await;
        match waited {
            Ok(Ready::Yes) => Ok(child),
            Ok(Ready::Exited(output)) => {
                let status = child
                    .try_status()
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "closed its output".to_owned());
                // Reap it now; it is already gone or going.
                let _ = child.shutdown().await;
                if says_addr_in_use(&output) {
                    Err(StartError::AddrInUse(status))
                } else {
                    Err(StartError::Other(
                        Failure::new(
                            format!("{name} starts"),
                            format!("{name} listens on {addr}"),
                        )
                        .actual(format!("it {status} before it was ready; output: {output}"))
                        .into(),
                    ))
                }
            }
            Err(_) => Err(StartError::Other(
                Failure::new(
                    format!("{name} starts"),
                    format!("{name} ready on {addr} within {:?}", self.timeout()),
                )
                .actual("not ready in time")
                .into(),
            )),
        }
    }

    /// Ends every process this scenario started (SIGTERM, grace, SIGKILL, reap) and reports
    /// each; the runner does the same after every check.
    pub async fn teardown(&self) -> Vec<Termination> {
        let terminations = self.inner.tracker.shutdown_all().await;
        self.log_models();
        terminations
    }

    /// Keeps a fake model started for one of this scenario's agents (`what`: the variant and
    /// the script) until the scenario ends; its requests go to the wire log at teardown.
    pub fn keep_model(&self, what: String, model: Arc<ski_mocks::model::FakeModel>) {
        self.note(format!(
            "fake model for {what} at {} (key {})",
            model.openai_base_url(),
            model.api_keys().join(", ")
        ));
        if let Ok(mut models) = self.inner.models.lock() {
            models.push((what, model));
        }
    }

    /// The fake models started so far, oldest first.
    pub fn models(&self) -> Vec<Arc<ski_mocks::model::FakeModel>> {
        self.inner
            .models
            .lock()
            .map(|models| models.iter().map(|(_, m)| m.clone()).collect())
            .unwrap_or_default()
    }

    /// Writes each fake model's request log (what the agent asked its model, which turn of the
    /// script answered, how the request ended) to the wire log, once.
    fn log_models(&self) {
        let models = match self.inner.models.lock() {
            Ok(mut models) => std::mem::take(&mut *models),
            Err(_) => return,
        };
        for (what, model) in models {
            let requests = model.requests();
            self.note(format!(
                "fake model for {what}: {} request(s){}",
                requests.len(),
                match model.dropped_requests() {
                    0 => String::new(),
                    n => format!(", {n} older ones dropped from its log"),
                }
            ));
            for request in requests {
                let said = ski_mocks::model::last_user_text(request.api, &request.body);
                let said: String = said.chars().take(160).collect();
                self.note(format!(
                    "fake model request {}: {} {} stream={} turn={} status={} {:?}: {said:?}",
                    request.seq,
                    request.method,
                    request.path,
                    request.stream,
                    request
                        .turn
                        .map_or_else(|| "none".to_owned(), |t| t.to_string()),
                    request.status,
                    request.outcome,
                ));
            }
        }
    }

    /// Tears everything down (as [`Ctx::teardown`]) and fails unless every process group is gone
    /// and every address in `listeners` is free to bind again (scenario WS-064b: transports and
    /// server loops are closed after each test).
    pub async fn ensure_torn_down(
        &self,
        listeners: &[SocketAddr],
    ) -> Result<Vec<Termination>, CheckError> {
        let terminations = self.teardown().await;
        let survivors: Vec<String> = terminations
            .iter()
            .filter(|t| !t.group_gone || child::group_exists(t.pid))
            .map(ToString::to_string)
            .collect();
        if !survivors.is_empty() {
            return Err(Failure::new(
                "every process is gone after teardown",
                "no process group of the scenario exists after teardown",
            )
            .actual(survivors.join("; "))
            .into());
        }
        for addr in listeners {
            if !crate::port::is_free(*addr).await {
                return Err(Failure::new(
                    "every listener is closed after teardown",
                    format!("{addr} can be bound again after teardown"),
                )
                .actual(format!("{addr} is still in use"))
                .into());
            }
        }
        Ok(terminations)
    }
}

async fn limit_to<T>(
    limit: Duration,
    what: &str,
    fut: impl Future<Output = T>,
) -> Result<T, CheckError> {
    tokio::time::timeout(limit, fut)
        .await
        .map_err(|_| nothing_within(limit, what).at_deadline().into())
}

/// The failure of a wait for `what` that saw nothing within `limit`.
fn nothing_within(limit: Duration, what: &str) -> Failure {
    Failure::new(what, format!("{what} within {limit:?}"))
        .actual(format!("nothing after {limit:?}"))
}

fn render_words(
    template: &CommandTemplate,
    vars: &BTreeMap<String, String>,
) -> Result<Vec<String>, CheckError> {
    let words = template.words().map_err(CheckError::Harness)?;
    words
        .iter()
        .map(|w| render(w, vars).map_err(CheckError::harness))
        .collect()
}

enum Ready {
    Yes,
    /// The process ended its output or exited before it was ready; its output so far.
    Exited(String),
}

async fn wait_ready(child: &mut Child, addr: SocketAddr, readiness: &Readiness) -> Ready {
    let mut output = String::new();
    match readiness {
        Readiness::Line(text) => {
            while let Some((_, line)) = child.next_output_line().await {
                if line.contains(text.as_str()) {
                    return Ready::Yes;
                }
                output.push_str(&line);
                output.push('\n');
            }
            let _ = child.wait().await;
            Ready::Exited(output)
        }
        Readiness::Connect => loop {
            if child.try_status().is_some() {
                while let Ok(Some(line)) =
                    tokio::time::timeout(Duration::from_millis(200), child.next_stderr_line()).await
                {
                    output.push_str(&line);
                    output.push('\n');
                }
                return Ready::Exited(output);
            }
            if tokio::net::TcpStream::connect(addr).await.is_ok() && child.try_status().is_none() {
                return Ready::Yes;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        },
    }
}
