//! The campaign: a seeded loop that mutates corpus entries and runs them through one target on
//! a worker thread, catching panics; a watchdog on the calling thread that turns an input running
//! past its time limit into a hang finding and a process past its memory limit into a memory
//! finding; saving, minimising and replaying findings.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once, mpsc};
use std::time::{Duration, Instant};

use crate::alloc;
use crate::corpus::{artifacts_dir, corpus_dir, read_all};
use crate::mutate::Mutator;
use crate::rng::{Rng, fnv1a};
use crate::targets::Target;

/// How one campaign runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How long to fuzz the target.
    pub time: Duration,
    /// The seed of the mutation sequence.
    pub seed: u64,
    /// The longest input generated.
    pub max_len: usize,
    /// How long one input may run before it is a hang.
    pub exec_timeout: Duration,
    /// The most bytes one input may make live at once before it is a memory finding.
    pub alloc_limit: usize,
    /// The resident size of the process that ends the campaign as a memory finding.
    pub rss_limit: u64,
    /// The repository root (seeds, corpus, artifacts).
    pub root: PathBuf,
    /// Also write inputs that reached a new outcome class to `fuzz/corpus/<target>/`.
    pub save_corpus: bool,
}

/// What a campaign found in one input.
#[derive(Debug, Clone)]
pub struct Finding {
    /// `panic`, `hang`, `memory` or `leak`.
    pub kind: &'static str,
    /// The panic message and place, or what was exceeded.
    pub message: String,
    /// Where the (minimised) input was saved.
    pub saved: Option<PathBuf>,
}

/// The result of one campaign.
#[derive(Debug)]
pub struct Summary {
    /// The target's name.
    pub target: &'static str,
    /// Inputs run.
    pub executions: u64,
    /// How long it ran.
    pub elapsed: Duration,
    /// Corpus entries at the end (seeds and new finds).
    pub corpus: usize,
    /// What it found.
    pub findings: Vec<Finding>,
    /// A hang or the memory limit stopped the campaign with its worker still running: the
    /// process has to exit after reporting.
    pub stuck: bool,
}

impl Summary {
    /// The one-line summary: executions, rate, corpus, findings.
    pub fn line(&self) -> String {
        let seconds = self.elapsed.as_secs_f64().max(1e-9);
        format!(
            "{:<15} {:>10} execs {:>9.0} execs/s  corpus {:>5}  findings {}",
            self.target,
            self.executions,
            self.executions as f64 / seconds,
            self.corpus,
            self.findings.len()
        )
    }
}

thread_local! {
    /// Set while a target runs: its panics are recorded here instead of printed.
    static QUIET: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs (once) a panic hook that records the panics of running targets and prints all
/// others as before.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if QUIET.with(Cell::get) {
                let place = info
                    .location()
                    .map(|l| format!("{}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                let payload = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "non-text panic".to_owned());
                LAST_PANIC.with(|last| *last.borrow_mut() = Some(format!("{place}: {payload}")));
            } else {
                previous(info);
            }
        }));
    });
}

/// Runs one input through a target on this thread: its outcome class, or the panic (place and
/// message).
pub fn execute(target: &Target, input: &[u8]) -> Result<u64, String> {
    install_panic_hook();
    QUIET.with(|quiet| quiet.set(true));
    let outcome = catch_unwind(AssertUnwindSafe(|| (target.run)(input)));
    QUIET.with(|quiet| quiet.set(false));
    outcome.map_err(|_| {
        LAST_PANIC
            .with(|last| last.borrow_mut().take())
            .unwrap_or_else(|| "panic without a message".to_owned())
    })
}

/// The place of a panic (`file:line`), which identifies it across inputs.
fn panic_place(message: &str) -> &str {
    message.split(": ").next().unwrap_or(message)
}

/// State shared between the worker and the watchdog.
struct Shared {
    /// The input running now.
    current: Mutex<Vec<u8>>,
    /// When the current input started, in milliseconds since the campaign began; 0 when idle.
    started_ms: AtomicU64,
    executions: AtomicU64,
    stop: AtomicBool,
}

/// Fuzzes one target for `settings.time`.
pub fn fuzz(target: &'static Target, settings: &Settings) -> Summary {
    let shared = Arc::new(Shared {
        current: Mutex::new(Vec::new()),
        started_ms: AtomicU64::new(0),
        executions: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });
    let began = Instant::now();
    let worker = {
        let shared = Arc::clone(&shared);
        let settings = settings.clone();
        std::thread::Builder::new()
            .name(format!("fuzz-{}", target.name))
            .stack_size(8 << 20)
            .spawn(move || work(target, &settings, &shared, began))
    };
    let worker = match worker {
        Ok(worker) => worker,
        Err(error) => {
            return Summary {
                target: target.name,
                executions: 0,
                elapsed: Duration::ZERO,
                corpus: 0,
                findings: vec![Finding {
                    kind: "harness",
                    message: format!("cannot start the worker thread: {error}"),
                    saved: None,
                }],
                stuck: false,
            };
        }
    };
    loop {
        if worker.is_finished() {
            let (corpus, findings) = worker.join().unwrap_or_else(|_| {
                (
                    0,
                    vec![Finding {
                        kind: "harness",
                        message: "the worker thread panicked outside a target".to_owned(),
                        saved: None,
                    }],
                )
            });
            return Summary {
                target: target.name,
                executions: shared.executions.load(Ordering::Relaxed),
                elapsed: began.elapsed(),
                corpus,
                findings,
                stuck: false,
            };
        }
        std::thread::sleep(Duration::from_millis(20));
        let started = shared.started_ms.load(Ordering::Acquire);
        let now = began.elapsed().as_millis() as u64;
        let hung =
            started != 0 && now.saturating_sub(started) > settings.exec_timeout.as_millis() as u64;
        let resident = resident_bytes();
        let over_memory = resident.is_some_and(|bytes| bytes > settings.rss_limit);
        if hung || over_memory {
            shared.stop.store(true, Ordering::Relaxed);
            let input = shared
                .current
                .lock()
                .map(|current| current.clone())
                .unwrap_or_default();
            let (kind, message) = if hung {
                (
                    "hang",
                    format!("one input ran longer than {:?}", settings.exec_timeout),
                )
            } else {
                (
                    "memory",
                    format!(
                        "the process grew to {} MiB (limit {} MiB)",
                        resident.unwrap_or(0) >> 20,
                        settings.rss_limit >> 20
                    ),
                )
            };
            let saved = save_artifact(settings, target, kind, &input, &message);
            return Summary {
                target: target.name,
                executions: shared.executions.load(Ordering::Relaxed),
                elapsed: began.elapsed(),
                corpus: 0,
                findings: vec![Finding {
                    kind,
                    message,
                    saved,
                }],
                stuck: true,
            };
        }
    }
}

/// The worker: seeds first, then mutations until the time is up. Returns the corpus size and
/// the findings.
fn work(
    target: &Target,
    settings: &Settings,
    shared: &Shared,
    began: Instant,
) -> (usize, Vec<Finding>) {
    let mut rng = Rng::new(settings.seed);
    let mutator = Mutator {
        max_len: settings.max_len,
        words: target.words,
    };
    let mut corpus: Vec<Vec<u8>> = (target.seeds)(&settings.root);
    corpus.extend(read_all(&corpus_dir(&settings.root, target.name), ""));
    corpus.extend(read_all(&artifacts_dir(&settings.root, target.name), ""));
    if corpus.is_empty() {
        corpus.push(Vec::new());
    }
    let mut classes = HashSet::new();
    let mut findings: Vec<Finding> = Vec::new();
    let mut places = HashSet::new();
    let mut queue: Vec<Vec<u8>> = corpus.clone();
    queue.reverse();
    let mut leak_checks = 0u32;
    while !shared.stop.load(Ordering::Relaxed) && began.elapsed() < settings.time {
        let input = match queue.pop() {
            Some(seed) => seed,
            None => {
                let parent = rng.below(corpus.len());
                mutator.mutate(&mut rng, &corpus[parent], &corpus)
            }
        };
        let run = run_watched(target, &input, shared, began);
        let executions = shared.executions.fetch_add(1, Ordering::Relaxed) + 1;
        match run.outcome {
            Ok(class) => {
                if run.peak_growth > settings.alloc_limit {
                    let message = format!(
                        "one input of {} bytes made {} MiB live at once (limit {} MiB)",
                        input.len(),
                        run.peak_growth >> 20,
                        settings.alloc_limit >> 20
                    );
                    if places.insert(format!("memory:{class}")) {
                        let saved = save_artifact(settings, target, "memory", &input, &message);
                        findings.push(Finding {
                            kind: "memory",
                            message,
                            saved,
                        });
                    }
                } else if run.left_live > 0 && executions > 2000 && leak_checks < 64 {
                    leak_checks += 1;
                    if leaks_every_time(target, &input, shared, began)
                        && places.insert("leak".to_owned())
                    {
                        let message = format!(
                            "one input leaves {} bytes live after every run",
                            run.left_live
                        );
                        let saved = save_artifact(settings, target, "leak", &input, &message);
                        findings.push(Finding {
                            kind: "leak",
                            message,
                            saved,
                        });
                    }
                }
                if classes.insert(class) && corpus.len() < 8192 {
                    if settings.save_corpus && input.len() <= 4096 {
                        save_corpus_entry(settings, target, &input);
                    }
                    corpus.push(input);
                }
            }
            Err(message) => {
                let place = panic_place(&message).to_owned();
                if places.insert(place.clone()) {
                    let minimal = minimise(target, &input, &place, shared, began);
                    let saved = save_artifact(settings, target, "panic", &minimal, &message);
                    findings.push(Finding {
                        kind: "panic",
                        message,
                        saved,
                    });
                }
            }
        }
    }
    (corpus.len(), findings)
}

struct Run {
    outcome: Result<u64, String>,
    /// The most bytes the run made live above what was live when it began.
    peak_growth: usize,
    /// Bytes still live after the run that were not before it.
    left_live: usize,
}

fn run_watched(target: &Target, input: &[u8], shared: &Shared, began: Instant) -> Run {
    if let Ok(mut current) = shared.current.lock() {
        current.clear();
        current.extend_from_slice(input);
    }
    let before = alloc::reset_peak();
    shared.started_ms.store(
        (began.elapsed().as_millis() as u64).max(1),
        Ordering::Release,
    );
    let outcome = execute(target, input);
    shared.started_ms.store(0, Ordering::Release);
    Run {
        outcome,
        peak_growth: alloc::peak().saturating_sub(before).max(0) as usize,
        left_live: alloc::live().saturating_sub(before).max(0) as usize,
    }
}

/// Whether running `input` three more times leaves memory behind every time.
fn leaks_every_time(target: &Target, input: &[u8], shared: &Shared, began: Instant) -> bool {
    (0..3).all(|_| run_watched(target, input, shared, began).left_live > 0)
}

/// The smallest input (by removing chunks, then single bytes) that still panics at `place`;
/// at most a few thousand runs.
fn minimise(
    target: &Target,
    input: &[u8],
    place: &str,
    shared: &Shared,
    began: Instant,
) -> Vec<u8> {
    let mut best = input.to_vec();
    let mut budget = 4000u32;
    let mut chunk = best.len().div_ceil(2).max(1);
    loop {
        let mut at = 0;
        while at < best.len() && budget > 0 {
            budget -= 1;
            let mut candidate = best.clone();
            candidate.drain(at..(at + chunk).min(best.len()));
            match run_watched(target, &candidate, shared, began).outcome {
                Err(message) if panic_place(&message) == place => best = candidate,
                _ => at += chunk,
            }
        }
        if chunk == 1 || budget == 0 {
            return best;
        }
        chunk = chunk.div_ceil(2);
    }
}

fn save_artifact(
    settings: &Settings,
    target: &Target,
    kind: &str,
    input: &[u8],
    message: &str,
) -> Option<PathBuf> {
    let dir = artifacts_dir(&settings.root, target.name);
    std::fs::create_dir_all(&dir).ok()?;
    let name = format!("{kind}-{:016x}", fnv1a(input));
    let path = dir.join(&name);
    std::fs::write(&path, input).ok()?;
    let note = format!(
        "target: {}\nkind: {kind}\nseed: {}\nfound: {message}\nreproduce: cargo xtask fuzz --target {} --reproduce fuzz/artifacts/{}/{name}\n",
        target.name, settings.seed, target.name, target.name
    );
    std::fs::write(dir.join(format!("{name}.txt")), note).ok()?;
    Some(path)
}

fn save_corpus_entry(settings: &Settings, target: &Target, input: &[u8]) {
    let dir = corpus_dir(&settings.root, target.name);
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(dir.join(format!("{:016x}", fnv1a(input))), input);
    }
}

/// The resident size of this process, from `/proc/self/statm` (Linux); `None` elsewhere.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// Why one replayed input failed.
#[derive(Debug)]
pub struct ReplayFailure {
    /// The target.
    pub target: &'static str,
    /// The input's name.
    pub input: String,
    /// The panic, or that it ran past the limit.
    pub message: String,
}

/// Runs named inputs through a target once each on a worker thread, each within `limit`; stops
/// at the first input that runs past it (its thread cannot be stopped).
pub fn replay(
    target: &'static Target,
    inputs: Vec<(String, Vec<u8>)>,
    limit: Duration,
) -> Vec<ReplayFailure> {
    let names: Vec<String> = inputs.iter().map(|(name, _)| name.clone()).collect();
    let (sender, receiver) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name(format!("replay-{}", target.name))
        .stack_size(8 << 20)
        .spawn(move || {
            for (name, input) in inputs {
                let outcome = execute(target, &input);
                if sender.send((name, outcome)).is_err() {
                    return;
                }
            }
        });
    let mut failures = Vec::new();
    if let Err(error) = spawned {
        failures.push(ReplayFailure {
            target: target.name,
            input: String::new(),
            message: format!("cannot start the replay thread: {error}"),
        });
        return failures;
    }
    for name in names {
        match receiver.recv_timeout(limit) {
            Ok((_, Ok(_))) => {}
            Ok((input, Err(message))) => failures.push(ReplayFailure {
                target: target.name,
                input,
                message,
            }),
            Err(_) => {
                failures.push(ReplayFailure {
                    target: target.name,
                    input: name,
                    message: format!("ran longer than {limit:?} (a hang)"),
                });
                break;
            }
        }
    }
    failures
}

/// Every replay input of the repository at `root`: each target's seeds, the in-tree corpus of
/// every target and every saved finding, named by where they came from.
pub fn replay_inputs(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut inputs = Vec::new();
    for target in crate::targets::TARGETS {
        for (index, seed) in (target.seeds)(root).into_iter().enumerate() {
            inputs.push((format!("seed {} #{index}", target.name), seed));
        }
        for dir in [
            corpus_dir(root, target.name),
            artifacts_dir(root, target.name),
        ] {
            for path in crate::corpus::files_under(&dir, "") {
                if let Ok(bytes) = std::fs::read(&path) {
                    let name = path
                        .strip_prefix(root)
                        .unwrap_or(&path)
                        .display()
                        .to_string();
                    inputs.push((name, bytes));
                }
            }
        }
    }
    inputs
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Panics on any input holding the byte 0xff.
    static PANICS_ON_FF: Target = Target {
        name: "test-panics",
        about: "",
        run: |data| {
            assert!(!data.contains(&0xff), "found 0xff");
            0
        },
        seeds: |_| vec![b"a quiet seed".to_vec()],
        words: &[],
    };

    /// Never returns on an input starting with `h`.
    static HANGS_ON_H: Target = Target {
        name: "test-hangs",
        about: "",
        run: |data| {
            while data.first() == Some(&b'h') {
                std::thread::sleep(Duration::from_secs(1));
            }
            0
        },
        seeds: |_| vec![b"h".to_vec()],
        words: &[],
    };

    /// Makes 64 MiB live on an input holding `m`.
    static ALLOCATES_ON_M: Target = Target {
        name: "test-memory",
        about: "",
        run: |data| {
            if data.contains(&b'm') {
                let block = vec![1u8; 64 << 20];
                return u64::from(block[block.len() / 2]);
            }
            0
        },
        seeds: |_| vec![b"m".to_vec()],
        words: &[],
    };

    fn settings(name: &str, time: Duration) -> Settings {
        let root = std::env::temp_dir().join(format!("ski-fuzz-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        Settings {
            time,
            seed: 5,
            max_len: 256,
            exec_timeout: Duration::from_millis(300),
            alloc_limit: 16 << 20,
            rss_limit: u64::MAX,
            root,
            save_corpus: false,
        }
    }

    #[test]
    fn a_panic_is_found_minimised_and_saved_with_its_seed() {
        let settings = settings("panic", Duration::from_secs(3));
        let summary = fuzz(&PANICS_ON_FF, &settings);
        assert!(!summary.stuck);
        assert!(summary.executions > 100);
        assert_eq!(summary.findings.len(), 1, "{:?}", summary.findings);
        let finding = &summary.findings[0];
        assert_eq!(finding.kind, "panic");
        assert!(
            finding.message.contains("found 0xff"),
            "{}",
            finding.message
        );
        let saved = finding.saved.clone().expect("the input is saved");
        assert_eq!(
            std::fs::read(&saved).unwrap(),
            vec![0xff],
            "minimised to the one byte"
        );
        let note = std::fs::read_to_string(saved.with_extension("txt")).unwrap();
        assert!(note.contains("seed: 5"), "{note}");
        assert!(
            note.contains("--reproduce fuzz/artifacts/test-panics/"),
            "{note}"
        );
        // The saved finding is replayed, and fails again.
        let replayed = replay(
            &PANICS_ON_FF,
            vec![("saved".to_owned(), vec![0xff])],
            Duration::from_secs(5),
        );
        assert_eq!(replayed.len(), 1);
        std::fs::remove_dir_all(&settings.root).unwrap();
    }

    #[test]
    fn an_input_past_the_time_limit_is_a_hang_and_stops_the_campaign() {
        let settings = settings("hang", Duration::from_secs(30));
        let began = Instant::now();
        let summary = fuzz(&HANGS_ON_H, &settings);
        assert!(began.elapsed() < Duration::from_secs(10));
        assert!(summary.stuck);
        assert_eq!(summary.findings.len(), 1);
        assert_eq!(summary.findings[0].kind, "hang");
        let saved = summary.findings[0]
            .saved
            .clone()
            .expect("the input is saved");
        assert_eq!(std::fs::read(&saved).unwrap(), b"h");
        let replayed = replay(
            &HANGS_ON_H,
            vec![("h".to_owned(), b"h".to_vec())],
            Duration::from_millis(200),
        );
        assert!(replayed[0].message.contains("a hang"), "{:?}", replayed);
        std::fs::remove_dir_all(&settings.root).unwrap();
    }

    #[test]
    fn an_input_that_allocates_past_the_limit_is_a_memory_finding() {
        assert!(alloc::installed(), "the test build counts allocations");
        let settings = settings("memory", Duration::from_millis(500));
        let summary = fuzz(&ALLOCATES_ON_M, &settings);
        assert!(!summary.stuck);
        let kinds: Vec<&str> = summary.findings.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, ["memory"], "{:?}", summary.findings);
        assert!(
            summary.findings[0].message.contains("64 MiB"),
            "{}",
            summary.findings[0].message
        );
        std::fs::remove_dir_all(&settings.root).unwrap();
    }
}
