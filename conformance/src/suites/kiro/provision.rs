//! BR-03 (provisioner safety) and BR-04 (sync behaviour), and the named provisioner tests:
//! judged from the files `provision` (and the startup of `echo`) leave in the kiro home
//! (`$HOME/.kiro`), compared with snapshots taken before.

use std::collections::BTreeMap;
use std::path::Path;

use super::config::EXIT_CONFIG;
use super::harness::{AGENT, Kiro};
use crate::suites::aof::adapter::Output;
use crate::{Check, CheckError, CheckResult, Ctx, Failure, ensure, ensure_eq};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "BR-03.1",
            "Provisions into a home holding prefixed and other entries: every prefixed destination entry that is not in the template is gone, the report deletes only prefixed names.",
            br_03_1,
        ),
        Check::new(
            "BR-03.2",
            "Snapshots every entry of the home without the prefix (other agents, other case, files beside the managed dirs) before and after `provision`: identical. Links are KIRO-SKI-03.",
            br_03_2,
        ),
        Check::new(
            "BR-03.3",
            "21 prefixed entries in the home: exit 3 and nothing deleted or copied; 20: accepted. The template side is KIRO-SKI-04.",
            br_03_3,
        ),
        Check::new(
            "BR-03.4",
            "A template without agents/NAME.json (empty, or only steering files): exit 3, the home untouched.",
            br_03_4,
        ),
        Check::new(
            "BR-03.5",
            "After an accepted sync agents/NAME.json exists in the home with the template's content ({{KIRO_HOME}} replaced); a sync whose destination cannot be written is not reported ok.",
            br_03_5,
        ),
        Check::new(
            "BR-03.6",
            "Provisions into an empty home: agents/, steering/ and skills/ are created even when the template has nothing for one of them.",
            br_03_6,
        ),
        Check::new(
            "BR-04.1",
            "Changes the template and the installed files between runs: every `provision` and every `echo` startup installs the template's current content.",
            br_04_1,
        ),
        Check::new(
            "BR-04.2",
            "A prefixed file absent from the template is deleted, and a prefixed directory with an extra file is replaced by the template's (no merge).",
            br_04_2,
        ),
        Check::new(
            "BR-04.3",
            "Stale prefixed entries in agents/, steering/ and skills/ are each deleted and each directory's template entries copied.",
            br_04_3,
        ),
        Check::new(
            "BR-04.4",
            "A prefixed skill directory with nested files is copied whole; a prefixed destination directory is deleted whole.",
            br_04_4,
        ),
        Check::new(
            "BR-04.5",
            "Entries whose names differ from the prefix only by case are neither deleted nor copied.",
            br_04_5,
        ),
        Check::new(
            "BR-T10",
            "test_provisioner_safety_limit: more than 20 matching files aborts the sync.",
            br_03_3,
        ),
        Check::new(
            "BR-T11",
            "test_provisioner_empty_template: an empty template directory aborts the sync.",
            br_03_4,
        ),
        Check::new(
            "BR-T12",
            "test_provisioner_sync: matching files are deleted and replaced.",
            br_t12,
        ),
        Check::new(
            "BR-T13",
            "test_provisioner_no_collateral: files without the prefix are untouched.",
            br_03_2,
        ),
    ]
}

/// A tree's entries: relative path → a description of what is there (kind and content).
pub type Snapshot = BTreeMap<String, String>;

pub fn snapshot(root: &Path) -> Result<Snapshot, CheckError> {
    let mut found = Snapshot::new();
    walk(root, root, &mut found)?;
    Ok(found)
}

fn walk(root: &Path, dir: &Path, found: &mut Snapshot) -> Result<(), CheckError> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries {
        let path = entry.map_err(CheckError::harness)?.path();
        let relative = path
            .strip_prefix(root)
            .map_err(CheckError::harness)?
            .display()
            .to_string();
        let meta = std::fs::symlink_metadata(&path).map_err(CheckError::harness)?;
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path).map_err(CheckError::harness)?;
            found.insert(relative, format!("link -> {}", target.display()));
        } else if meta.is_dir() {
            found.insert(relative, "dir".to_owned());
            walk(root, &path, found)?;
        } else {
            let bytes = std::fs::read(&path).map_err(CheckError::harness)?;
            let modified = meta
                .modified()
                .ok()
                .map(|t| format!("{t:?}"))
                .unwrap_or_default();
            found.insert(
                relative,
                format!(
                    "file {:?} modified {modified}",
                    String::from_utf8_lossy(&bytes)
                ),
            );
        }
    }
    Ok(())
}

/// The snapshot without the managed entries that start with the agent name (and their trees).
pub fn unowned(snapshot: &Snapshot) -> Snapshot {
    snapshot
        .iter()
        .filter(|(path, _)| {
            let mut parts = path.split('/');
            let dir = parts.next().unwrap_or("");
            let name = parts.next().unwrap_or("");
            !(["agents", "steering", "skills"].contains(&dir) && name.starts_with(AGENT))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

pub fn diff(before: &Snapshot, after: &Snapshot) -> String {
    let mut lines = Vec::new();
    for (path, was) in before {
        match after.get(path) {
            None => lines.push(format!("{path} deleted (was {was})")),
            Some(now) if now != was => lines.push(format!("{path} changed: {was} -> {now}")),
            _ => {}
        }
    }
    for path in after.keys().filter(|p| !before.contains_key(*p)) {
        lines.push(format!("{path} created"));
    }
    lines.join("; ")
}

/// The report of an accepted `provision`: `{ok:true, deleted, copied}`.
pub fn provisioned(output: &Output) -> Result<serde_json::Value, CheckError> {
    let report = output.json()?;
    if output.code == Some(0) && report["ok"] == true {
        return Ok(report);
    }
    Err(
        Failure::new("`provision` succeeds", "exit 0 and {\"ok\":true,...}")
            .actual(format!(
                "exit {}; stdout: {}; stderr: {}",
                output.exit(),
                output.stdout.trim(),
                output.stderr.trim()
            ))
            .into(),
    )
}

pub fn refused(output: &Output, what: &str) -> CheckResult {
    let report = output.json().ok();
    if output.code == Some(EXIT_CONFIG) && report.is_some_and(|r| r["ok"] == false) {
        return Ok(());
    }
    Err(Failure::new(
        format!("{what} is refused"),
        format!("exit {EXIT_CONFIG} and {{\"ok\":false,...}}"),
    )
    .actual(format!(
        "exit {}; stdout: {}; stderr: {}",
        output.exit(),
        output.stdout.trim(),
        output.stderr.trim()
    ))
    .into())
}

fn names(report: &serde_json::Value, key: &str) -> Vec<String> {
    report[key]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A home with entries of the agent and of others, some of them look-alikes.
pub fn populate(kiro: &Kiro) -> CheckResult {
    kiro.home_file(&format!("agents/{AGENT}.json"), "old agent")?;
    kiro.home_file(&format!("steering/{AGENT}-stale.md"), "stale")?;
    kiro.home_file(&format!("skills/{AGENT}-old/SKILL.md"), "old skill")?;
    kiro.home_file("agents/other-bot.json", "other agent")?;
    kiro.home_file("agents/TG-ACP.json", "other case")?;
    kiro.home_file(
        "agents/xtg-acp.json",
        "contains the name, does not start with it",
    )?;
    kiro.home_file("steering/shared.md", "shared steering")?;
    kiro.home_file("skills/other-skill/SKILL.md", "other skill")?;
    kiro.home_file("settings/cli.json", "{\"chat\":{}}")?;
    kiro.home_file(&format!("sessions/cli/{AGENT}-session.json"), "a session")?;
    kiro.home_file(&format!("{AGENT}.json"), "beside the managed dirs")?;
    Ok(())
}

async fn br_03_1(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    populate(&kiro)?;
    let report = provisioned(&kiro.provision().await?)?;
    let home = kiro.kiro_home();
    for stale in [
        format!("steering/{AGENT}-stale.md"),
        format!("skills/{AGENT}-old"),
    ] {
        ensure!(
            !home.join(&stale).exists(),
            format!("the prefixed entry {stale} is deleted"),
            "it is still there"
        );
    }
    let deleted = names(&report, "deleted");
    for name in &deleted {
        let entry = name.rsplit('/').next().unwrap_or("");
        ensure!(
            entry.starts_with(AGENT),
            "only entries with the prefix are deleted",
            "the report deletes {name}"
        );
    }
    Ok(())
}

async fn br_03_2(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    populate(&kiro)?;
    let before = unowned(&snapshot(&kiro.kiro_home())?);
    provisioned(&kiro.provision().await?)?;
    let changes = diff(&before, &unowned(&snapshot(&kiro.kiro_home())?));
    ensure!(
        changes.is_empty(),
        "entries without the prefix are neither modified nor deleted",
        "{changes}"
    );
    Ok(())
}

async fn br_03_3(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    for i in 0..21 {
        let dir = ["agents", "steering", "skills"][i % 3];
        kiro.home_file(&format!("{dir}/{AGENT}-{i:02}.md"), "x")?;
    }
    kiro.template_file(&format!("steering/{AGENT}-context.md"), "new")?;
    let before = snapshot(&kiro.kiro_home())?;
    refused(&kiro.provision().await?, "a home with 21 prefixed entries")?;
    let changes = diff(&before, &snapshot(&kiro.kiro_home())?);
    ensure!(
        changes.is_empty(),
        "an aborted sync deletes and copies nothing",
        "{changes}"
    );

    std::fs::remove_file(kiro.kiro_home().join(format!("agents/{AGENT}-00.md")))
        .map_err(CheckError::harness)?;
    provisioned(&kiro.provision().await?)?;
    Ok(())
}

async fn br_03_4(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    std::fs::remove_dir_all(kiro.template()).map_err(CheckError::harness)?;
    std::fs::create_dir_all(kiro.template()).map_err(CheckError::harness)?;
    populate(&kiro)?;
    let before = snapshot(&kiro.kiro_home())?;
    refused(&kiro.provision().await?, "an empty template")?;
    kiro.template_file(&format!("steering/{AGENT}-context.md"), "steering only")?;
    refused(
        &kiro.provision().await?,
        "a template without the agent JSON",
    )?;
    let changes = diff(&before, &snapshot(&kiro.kiro_home())?);
    ensure!(
        changes.is_empty(),
        "a refused template leaves the home as it was",
        "{changes}"
    );
    Ok(())
}

async fn br_03_5(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    provisioned(&kiro.provision().await?)?;
    let installed = kiro.kiro_home().join(format!("agents/{AGENT}.json"));
    let text = std::fs::read_to_string(&installed).unwrap_or_default();
    ensure!(
        text.contains(&format!("\"name\":\"{AGENT}\"")),
        "the agent JSON exists at the target after the sync",
        "{} holds {text:?}",
        installed.display()
    );
    let home = std::path::absolute(kiro.kiro_home()).map_err(CheckError::harness)?;
    ensure!(
        text.contains(&format!(
            "file://{}/steering/{AGENT}-context.md",
            home.display()
        )) && !text.contains("{{KIRO_HOME}}"),
        "{{KIRO_HOME}} is replaced with the kiro home's absolute path",
        "{text}"
    );
    // A destination where the agent JSON cannot be placed: agents/ is a regular file.
    let kiro = Kiro::new(&ctx)?;
    kiro.home_file("agents", "not a directory")?;
    let output = kiro.provision().await?;
    let report = output.json().unwrap_or_default();
    ensure!(
        output.code != Some(0) && report["ok"] != true,
        "a sync that cannot install the agent JSON fails",
        "exit {}; stdout {}",
        output.exit(),
        output.stdout.trim()
    );
    Ok(())
}

async fn br_03_6(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    provisioned(&kiro.provision().await?)?;
    for dir in ["agents", "steering", "skills"] {
        ensure!(
            kiro.kiro_home().join(dir).is_dir(),
            format!("{dir}/ is created in the kiro home"),
            "it is missing"
        );
    }
    Ok(())
}

async fn br_04_1(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    let steering = format!("steering/{AGENT}-context.md");
    kiro.template_file(&steering, "version 1")?;
    provisioned(&kiro.provision().await?)?;
    kiro.template_file(&steering, "version 2")?;
    provisioned(&kiro.provision().await?)?;
    let installed = std::fs::read_to_string(kiro.kiro_home().join(&steering)).unwrap_or_default();
    ensure_eq!(
        "version 2",
        installed.as_str(),
        "the steering file after the second run"
    );
    kiro.home_file(&steering, "edited by hand")?;
    kiro.template_file(&steering, "version 3")?;
    let echo = kiro.echo("Say exactly: HI", &[]).await?;
    echo.ensure_code(0)?;
    let installed = std::fs::read_to_string(kiro.kiro_home().join(&steering)).unwrap_or_default();
    ensure_eq!(
        "version 3",
        installed.as_str(),
        "the steering file after a startup (`echo`)"
    );
    Ok(())
}

async fn br_04_2(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    kiro.template_file(&format!("skills/{AGENT}-skill/SKILL.md"), "template skill")?;
    kiro.home_file(&format!("steering/{AGENT}-gone.md"), "not in the template")?;
    kiro.home_file(&format!("skills/{AGENT}-skill/SKILL.md"), "old skill")?;
    kiro.home_file(
        &format!("skills/{AGENT}-skill/extra.md"),
        "only in the home",
    )?;
    provisioned(&kiro.provision().await?)?;
    let home = kiro.kiro_home();
    ensure!(
        !home.join(format!("steering/{AGENT}-gone.md")).exists(),
        "a prefixed file missing from the template is deleted",
        "it is still there"
    );
    ensure!(
        !home.join(format!("skills/{AGENT}-skill/extra.md")).exists(),
        "a synced directory is replaced, not merged",
        "extra.md survived"
    );
    let skill = std::fs::read_to_string(home.join(format!("skills/{AGENT}-skill/SKILL.md")))
        .unwrap_or_default();
    ensure_eq!("template skill", skill.as_str(), "the synced SKILL.md");
    Ok(())
}

async fn br_04_3(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    kiro.template_file(&format!("steering/{AGENT}-context.md"), "steering")?;
    kiro.template_file(&format!("skills/{AGENT}-skill/SKILL.md"), "skill")?;
    for dir in ["agents", "steering", "skills"] {
        kiro.home_file(&format!("{dir}/{AGENT}-stale-{dir}"), "stale")?;
    }
    let report = provisioned(&kiro.provision().await?)?;
    let home = kiro.kiro_home();
    for dir in ["agents", "steering", "skills"] {
        ensure!(
            !home.join(format!("{dir}/{AGENT}-stale-{dir}")).exists(),
            format!("the stale entry of {dir}/ is deleted"),
            "it is still there"
        );
    }
    for copied in [
        format!("agents/{AGENT}.json"),
        format!("steering/{AGENT}-context.md"),
        format!("skills/{AGENT}-skill/SKILL.md"),
    ] {
        ensure!(
            home.join(&copied).is_file(),
            format!("{copied} is copied"),
            "missing; report {report}"
        );
    }
    Ok(())
}

async fn br_04_4(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    kiro.template_file(&format!("skills/{AGENT}-skill/SKILL.md"), "skill")?;
    kiro.template_file(&format!("skills/{AGENT}-skill/scripts/run.sh"), "echo run")?;
    kiro.home_file(&format!("skills/{AGENT}-old/deep/file.md"), "old")?;
    provisioned(&kiro.provision().await?)?;
    let home = kiro.kiro_home();
    let nested = std::fs::read_to_string(home.join(format!("skills/{AGENT}-skill/scripts/run.sh")))
        .unwrap_or_default();
    ensure_eq!(
        "echo run",
        nested.as_str(),
        "the nested file of the copied skill directory"
    );
    ensure!(
        !home.join(format!("skills/{AGENT}-old")).exists(),
        "a prefixed destination directory is deleted whole",
        "it is still there"
    );
    Ok(())
}

async fn br_04_5(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    kiro.home_file("agents/TG-ACP.json", "upper case")?;
    kiro.home_file("steering/Tg-acp-context.md", "mixed case")?;
    kiro.template_file("steering/TG-acp-notes.md", "not ours")?;
    provisioned(&kiro.provision().await?)?;
    let home = kiro.kiro_home();
    ensure!(
        home.join("agents/TG-ACP.json").exists()
            && home.join("steering/Tg-acp-context.md").exists(),
        "entries differing by case are not deleted",
        "one was deleted"
    );
    ensure!(
        !home.join("steering/TG-acp-notes.md").exists(),
        "template entries differing by case are not copied",
        "it was copied"
    );
    Ok(())
}

async fn br_t12(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    kiro.home_file(&format!("agents/{AGENT}.json"), "old agent")?;
    kiro.home_file(&format!("steering/{AGENT}-old.md"), "old")?;
    kiro.template_file(&format!("steering/{AGENT}-context.md"), "new")?;
    let report = provisioned(&kiro.provision().await?)?;
    let mut deleted = names(&report, "deleted");
    deleted.sort();
    ensure_eq!(
        vec![
            format!("agents/{AGENT}.json"),
            format!("steering/{AGENT}-old.md")
        ],
        deleted,
        "the deleted entries"
    );
    let home = kiro.kiro_home();
    let agent =
        std::fs::read_to_string(home.join(format!("agents/{AGENT}.json"))).unwrap_or_default();
    ensure!(
        agent.contains("test agent"),
        "the agent JSON is replaced by the template's",
        "{agent:?}"
    );
    ensure!(
        home.join(format!("steering/{AGENT}-context.md")).is_file()
            && !home.join(format!("steering/{AGENT}-old.md")).exists(),
        "matching files are deleted and replaced",
        "steering/ differs"
    );
    Ok(())
}
