//! The trials of `ski-conformance` that are built at run time (libtest-mimic, `harness =
//! false`), one program: the reference run of every row, the stand-ins of AOF, teams and intercom,
//! and the defect corpora. Each module gives its `trials()`, run here under its name as the trial's
//! kind (`test [acp_defects] …`; a filter matches the kind too, so `-- acp_defects` runs one
//! module), and its `play_role`: the stand-ins, broken adapters and corpus clients are this program
//! started again with a flag naming the part it plays.

use std::process::ExitCode;

use libtest_mimic::{Arguments, Trial};

// Support shared by several modules.
#[path = "support/binaries.rs"]
mod binaries;
#[path = "support/corpus.rs"]
mod corpus;
mod corpus_client;
mod corpus_http_front;
mod corpus_ws_front;
#[path = "support/defects.rs"]
mod defects;
#[path = "support/one_row.rs"]
mod one_row;
mod support;

// One module per file of trials.
mod acp_defects;
mod aof_stand_in;
mod intercom_defects;
mod intercom_profile_knobs;
mod kiro_defects;
mod reference;
mod teams_defects;
mod teams_races;
mod teams_settings;

/// A module's trials, built when the program starts.
type TrialsOf = fn() -> Vec<Trial>;

fn main() -> ExitCode {
    if let Some(code) = corpus_client::run_if_asked() {
        return code;
    }
    if let Some(code) = corpus_ws_front::run_if_asked() {
        return code;
    }
    if let Some(code) = corpus_http_front::run_if_asked() {
        return code;
    }
    let argv: Vec<String> = std::env::args().collect();
    for play_role in [
        aof_stand_in::play_role,
        intercom_defects::play_role,
        intercom_profile_knobs::play_role,
        kiro_defects::play_role,
        teams_defects::play_role,
        teams_races::play_role,
        teams_settings::play_role,
    ] {
        play_role(&argv);
    }
    let modules: [(&str, TrialsOf); 9] = [
        ("acp_defects", acp_defects::trials),
        ("aof_stand_in", aof_stand_in::trials),
        ("intercom_defects", intercom_defects::trials),
        ("intercom_profile_knobs", intercom_profile_knobs::trials),
        ("kiro_defects", kiro_defects::trials),
        ("reference", reference::trials),
        ("teams_defects", teams_defects::trials),
        ("teams_races", teams_races::trials),
        ("teams_settings", teams_settings::trials),
    ];
    let trials = modules
        .into_iter()
        .flat_map(|(module, trials)| trials().into_iter().map(move |t| t.with_kind(module)))
        .collect();
    libtest_mimic::run(&Arguments::from_args(), trials).exit_code()
}
