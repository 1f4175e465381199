//! The `kiro-ski` suite: ski's own decisions where `kiro-unit1-business-rules.md` is silent or
//! admits more (E-KIRO-02, E-KIRO-05, E-KIRO-06, and reporting every prerequisite failure at
//! once). A target declares `kiro-ski-extensions` only when it makes the same decisions; the
//! document's own rows (the `kiro` suite) never require them (E-KIRO-17).

use serde_json::Value;

use super::config::{EXIT_CONFIG, Missing, failing_prerequisites, refuses_names};
use super::harness::{AGENT, Kiro};
use super::provision::{diff, populate, provisioned, refused, snapshot, unowned};
use crate::{Check, CheckError, CheckResult, Ctx, ensure};

/// The checks of the `kiro-ski` suite.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "KIRO-SKI-01",
            "Runs `check` with the agent name \"-rf\", which the document's pattern admits: refused with a KIRO_AGENT_NAME violation (E-KIRO-02).",
            kiro_ski_01,
        ),
        Check::new(
            "KIRO-SKI-02",
            "Runs `echo` with kiro-cli missing and the template missing: exit 3 naming both violations (PATH and KIRO_CONFIG_PATH), no kiro-cli started, nothing provisioned.",
            kiro_ski_02,
        ),
        Check::new(
            "KIRO-SKI-03",
            "A prefixed link in the home is deleted as a link, its target and the template untouched; a template whose prefixed skill holds a link is refused with the home unchanged (E-KIRO-06).",
            kiro_ski_03,
        ),
        Check::new(
            "KIRO-SKI-04",
            "A template with 21 prefixed entries is refused and nothing is copied (E-KIRO-05).",
            kiro_ski_04,
        ),
    ]
}

async fn kiro_ski_01(ctx: Ctx) -> CheckResult {
    refuses_names(&ctx, &["-rf"]).await
}

async fn kiro_ski_02(ctx: Ctx) -> CheckResult {
    let kiro = failing_prerequisites(&ctx, &[Missing::KiroCli, Missing::Template])?;
    let echo = kiro.echo("Say exactly: HI", &[]).await?;
    echo.ensure_code(EXIT_CONFIG)?;
    let printed = echo.events.first().cloned().unwrap_or(Value::Null);
    let keys: Vec<String> = printed["violations"]
        .as_array()
        .map(|v| {
            v.iter()
                .filter_map(|v| v["key"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    ensure!(
        keys.iter().any(|k| k == "PATH") && keys.iter().any(|k| k == "KIRO_CONFIG_PATH"),
        "every prerequisite failure is reported at once",
        "{}",
        echo.summary()
    );
    ensure!(
        echo.named("spawned").is_empty() && echo.transcripts.is_empty(),
        "the bot does not start kiro-cli",
        "{}",
        echo.summary()
    );
    ensure!(
        !kiro.kiro_home().exists(),
        "nothing is provisioned when a prerequisite fails",
        "{} exists",
        kiro.kiro_home().display()
    );
    Ok(())
}

async fn kiro_ski_03(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    populate(&kiro)?;
    let outside = kiro.root().join("outside");
    std::fs::create_dir_all(&outside).map_err(CheckError::harness)?;
    std::fs::write(outside.join("keep.md"), "outside the home").map_err(CheckError::harness)?;
    std::fs::create_dir_all(kiro.kiro_home().join("skills")).map_err(CheckError::harness)?;
    let link = kiro.kiro_home().join(format!("skills/{AGENT}-linked"));
    std::os::unix::fs::symlink(&outside, &link).map_err(CheckError::harness)?;
    let before_home = unowned(&snapshot(&kiro.kiro_home())?);
    let before_outside = snapshot(&outside)?;
    let before_template = snapshot(&kiro.template())?;
    provisioned(&kiro.provision().await?)?;
    ensure!(
        std::fs::symlink_metadata(&link).is_err(),
        "the prefixed link is deleted",
        "{} is still there",
        link.display()
    );
    let changes = diff(&before_home, &unowned(&snapshot(&kiro.kiro_home())?));
    ensure!(
        changes.is_empty(),
        "entries without the prefix are neither modified nor deleted",
        "{changes}"
    );
    let changes = diff(&before_outside, &snapshot(&outside)?);
    ensure!(
        changes.is_empty(),
        "the target of a prefixed link is not touched",
        "{changes}"
    );
    let changes = diff(&before_template, &snapshot(&kiro.template())?);
    ensure!(
        changes.is_empty(),
        "the template is not modified",
        "{changes}"
    );

    // A template whose prefixed skill links outside is refused without touching anything.
    let kiro = Kiro::new(&ctx)?;
    let secret = kiro.root().join("secret");
    std::fs::create_dir_all(&secret).map_err(CheckError::harness)?;
    std::fs::write(secret.join("id_rsa"), "private").map_err(CheckError::harness)?;
    kiro.template_file(&format!("skills/{AGENT}-skill/SKILL.md"), "skill")?;
    std::os::unix::fs::symlink(
        &secret,
        kiro.template().join(format!("skills/{AGENT}-skill/leak")),
    )
    .map_err(CheckError::harness)?;
    populate(&kiro)?;
    let before = snapshot(&kiro.kiro_home())?;
    refused(
        &kiro.provision().await?,
        "a template with a symlink pointing outside it (E-KIRO-06)",
    )?;
    let changes = diff(&before, &snapshot(&kiro.kiro_home())?);
    ensure!(
        changes.is_empty(),
        "a refused sync changes nothing in the home",
        "{changes}"
    );
    Ok(())
}

async fn kiro_ski_04(ctx: Ctx) -> CheckResult {
    let kiro = Kiro::new(&ctx)?;
    for i in 0..20 {
        kiro.template_file(&format!("skills/{AGENT}-{i:02}/SKILL.md"), "x")?;
    }
    refused(
        &kiro.provision().await?,
        "a template with 21 prefixed entries (E-KIRO-05)",
    )?;
    ensure!(
        !kiro.kiro_home().join("agents").exists(),
        "a refused template copies nothing",
        "agents/ was created"
    );
    Ok(())
}
